//! Replays every committed fuzz input (`fuzz/corpus/<target>/*` and
//! `fuzz/regressions/<target>/*`) through the same bodies the fuzz targets run, on the stable
//! toolchain, so that `make test` re-checks every input that ever found a bug. Also checks that
//! every target has a corpus, and that the generated seeds pass.

use std::path::{Path, PathBuf};

use riptide_stress::fuzz_bodies::{self, TARGETS};

fn fuzz_directory() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn inputs(directory: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(directory) else { return Vec::new() };
    let mut files: Vec<PathBuf> =
        entries.filter_map(Result::ok).map(|entry| entry.path()).filter(|path| path.is_file()).collect();
    files.sort();
    files
}

#[test]
fn committed_corpora_and_regressions_replay_cleanly() {
    let root = fuzz_directory();
    let mut replayed = 0;
    for (target, body) in TARGETS {
        let corpus = inputs(&root.join("corpus").join(target));
        assert!(!corpus.is_empty(), "target {target} has no committed corpus");
        for path in corpus.iter().chain(inputs(&root.join("regressions").join(target)).iter()) {
            let data = std::fs::read(path).expect("read input");
            let outcome = std::panic::catch_unwind(|| body(&data));
            assert!(outcome.is_ok(), "target {target}: input {} fails", path.display());
            replayed += 1;
        }
    }
    println!("replayed {replayed} fuzz inputs");
}

#[test]
fn every_fuzz_target_has_a_body() {
    let targets = std::fs::read_dir(fuzz_directory().join("fuzz_targets")).expect("fuzz/fuzz_targets");
    for entry in targets.filter_map(Result::ok) {
        let name = entry.path().file_stem().and_then(|stem| stem.to_str()).map(str::to_string).unwrap_or_default();
        assert!(fuzz_bodies::body(&name).is_some(), "fuzz target {name} has no body in fuzz_bodies::TARGETS");
    }
}

#[test]
fn generated_seeds_pass_their_bodies() {
    let seeds = fuzz_bodies::seed_corpus();
    for (target, _) in TARGETS {
        assert!(seeds.iter().any(|(name, _, _)| name == target), "no seed for {target}");
    }
    for (target, name, data) in seeds {
        let body = fuzz_bodies::body(target).expect("body");
        body(&data);
        let _ = name;
    }
}
