//! SSTable micro-benchmarks: block encoding, block decoding and seeking, bloom filter queries,
//! and point lookups and full scans of a table file read through the block cache.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use riptide::internals::sstable::{build_block, internal_key, BenchTable, Bloom, DecodedBlock};
use riptide::Compression;

/// Sorted entries with 16-byte user keys and `value_bytes`-byte values.
fn entries(count: usize, value_bytes: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..count)
        .map(|i| (internal_key(format!("user{:012}", i * 2).as_bytes(), 1 + i as u64), vec![b'v'; value_bytes]))
        .collect()
}

fn block_benches(c: &mut Criterion) {
    // About 4 KiB of entries: 24-byte internal keys, 16-byte values, shared prefixes.
    let block_entries = entries(100, 16);
    let encoded = build_block(&block_entries, 16);
    let mut group = c.benchmark_group("block");
    group.throughput(Throughput::Bytes(encoded.len() as u64));
    group.bench_function("encode_4k", |b| b.iter(|| build_block(black_box(&block_entries), 16)));
    let mut rng = SmallRng::seed_from_u64(1);
    group.bench_function("decode_and_seek_4k", |b| {
        b.iter_batched(
            || (encoded.clone(), block_entries[rng.gen_range(0..block_entries.len())].0.clone()),
            |(bytes, target)| DecodedBlock::decode(bytes).and_then(|block| block.seek(&target)),
            BatchSize::SmallInput,
        )
    });
    let decoded = DecodedBlock::decode(encoded.clone()).expect("a built block decodes");
    group.bench_function("seek_4k", |b| {
        b.iter(|| decoded.seek(black_box(&block_entries[rng.gen_range(0..block_entries.len())].0)))
    });
    group.bench_function("scan_4k", |b| b.iter(|| decoded.scan()));
    group.finish();
}

fn bloom_benches(c: &mut Criterion) {
    let keys: Vec<Vec<u8>> = (0..100_000u64).map(|i| format!("user{i:012}").into_bytes()).collect();
    let absent: Vec<Vec<u8>> = (0..100_000u64).map(|i| format!("absent{i:010}").into_bytes()).collect();
    let bloom = Bloom::build(&keys, 10);
    let mut group = c.benchmark_group("bloom");
    group.throughput(Throughput::Elements(1));
    let mut index = 0usize;
    group.bench_function("lookup_hit", |b| {
        b.iter(|| {
            index = (index + 7919) % keys.len();
            bloom.may_contain(black_box(&keys[index]))
        })
    });
    group.bench_function("lookup_miss", |b| {
        b.iter(|| {
            index = (index + 7919) % absent.len();
            bloom.may_contain(black_box(&absent[index]))
        })
    });
    group.finish();
}

fn table_benches(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let table_entries = entries(200_000, 100);
    let table = BenchTable::build(&dir.path().join("000001.sst"), &table_entries, Compression::Lz4)
        .expect("the bench table builds");
    let mut group = c.benchmark_group("table");
    group.throughput(Throughput::Elements(1));
    let mut rng = SmallRng::seed_from_u64(2);
    group.bench_function("get_hit_cached", |b| {
        b.iter(|| {
            let index = rng.gen_range(0..table_entries.len());
            table.get(black_box(&table_entries[index].0))
        })
    });
    // Absent keys inside the table's key range, so that the bloom filter does the rejecting.
    let absent: Vec<Vec<u8>> =
        (0..10_000).map(|i| internal_key(format!("user{:012}", i * 40 + 1).as_bytes(), u64::MAX >> 8)).collect();
    group.bench_function("get_miss", |b| b.iter(|| table.get(black_box(&absent[rng.gen_range(0..absent.len())]))));
    group.throughput(Throughput::Elements(table_entries.len() as u64));
    group.bench_function("scan_200k", |b| b.iter(|| table.scan()));
    group.finish();
}

criterion_group!(benches, block_benches, bloom_benches, table_benches);
criterion_main!(benches);
