//! Metamorphic tests: the same random operation sequence under every option set of
//! `riptide_stress::metamorphic::option_sets` must show exactly what a `BTreeMap` shows, across
//! column families that are dropped and created again as the sequence goes.

use riptide_stress::metamorphic;

#[test]
fn one_sequence_many_option_sets_same_answers() {
    for seed in 0..8 {
        if let Err(failure) = metamorphic::check_seed(seed, 3000) {
            panic!("{failure}");
        }
    }
}
