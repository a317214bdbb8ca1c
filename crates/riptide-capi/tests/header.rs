//! The committed header, `include/riptide.h`, must be exactly what cbindgen generates from the
//! crate's source and `cbindgen.toml`, so that C programs never see a stale declaration. Set
//! `RIPTIDE_BLESS_HEADER=1` to rewrite the committed file instead of failing.

use std::path::Path;

#[test]
fn committed_header_matches_the_source() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("read cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen could not generate the header");
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let header = crate_dir.join("include/riptide.h");
    if std::env::var_os("RIPTIDE_BLESS_HEADER").is_some() {
        std::fs::write(&header, &generated).expect("write include/riptide.h");
        return;
    }
    let committed = std::fs::read(&header).unwrap_or_default();
    assert!(
        committed == generated,
        "include/riptide.h differs from what the source generates; regenerate it with\n  \
         RIPTIDE_BLESS_HEADER=1 cargo test -p riptide-capi --test header\nand commit it"
    );
}
