//! The admission rules that belong to one lock kind: what a majority's replies mean for it.
//!
//! The quorum is the same for every kind. What differs is what the replies of a won round say
//! beyond "granted": a reentrant hold learns how many holds its owner now has.

use super::timing::quorum;

/// A reentrant lock's hold count after a won round: the largest count that a majority of the
/// `masters` reported at least. Masters that missed earlier holds report less; the count a majority
/// agrees on is the one any later majority shares.
pub fn majority_count(mut counts: Vec<u64>, masters: usize) -> u64 {
    counts.sort_unstable_by(|a, b| b.cmp(a));
    let at = quorum(masters).saturating_sub(1);
    counts.get(at).or(counts.last()).copied().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_hold_count_is_what_a_majority_has() {
        assert_eq!(majority_count(vec![2, 1, 2], 3), 2);
        assert_eq!(majority_count(vec![3, 1], 3), 1);
        assert_eq!(majority_count(vec![3, 3, 1, 2, 3], 5), 3);
        assert_eq!(majority_count(vec![1, 2, 3], 5), 1);
    }

    proptest! {
        /// With at least a majority of counts, at least a majority reported the count or more, and
        /// no larger count has that property.
        #[test]
        fn a_majority_reported_at_least_the_count(counts in prop::collection::vec(1u64..6, 1..8), extra in 0usize..3) {
            let masters = counts.len() + extra;
            let count = majority_count(counts.clone(), masters);
            let q = quorum(masters);
            if counts.len() >= q {
                prop_assert!(counts.iter().filter(|c| **c >= count).count() >= q);
                prop_assert!(counts.iter().filter(|c| **c > count).count() < q);
            } else {
                prop_assert_eq!(Some(count), counts.iter().min().copied());
            }
        }
    }
}
