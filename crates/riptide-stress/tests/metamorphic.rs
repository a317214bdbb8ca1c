//! Metamorphic tests: the same random operation sequence (range deletes, single deletes, puts
//! with an expiry, a moving clock and merge operands included) under every option set of
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

#[test]
fn sequences_delete_ranges_and_single_delete_within_the_contract() {
    let sequence = metamorphic::generate(3, 3000);
    let count =
        |matches: fn(&metamorphic::Operation) -> bool| sequence.operations.iter().filter(|op| matches(op)).count();
    assert!(count(|op| matches!(op, metamorphic::Operation::DeleteRange(..))) > 20);
    assert!(count(|op| matches!(op, metamorphic::Operation::SingleDelete(..))) > 20);
    let expired_when_written =
        count(|op| matches!(op, metamorphic::Operation::PutWithExpiry(_, _, _, offset) if *offset <= 0));
    assert!(expired_when_written > 10, "{expired_when_written} puts expired when written");
    assert!(count(|op| matches!(op, metamorphic::Operation::PutWithExpiry(..))) > 60);
    assert!(count(|op| matches!(op, metamorphic::Operation::AdvanceClock(..))) > 20);
    assert!(count(|op| matches!(op, metamorphic::Operation::Merge(..))) > 60);
}
