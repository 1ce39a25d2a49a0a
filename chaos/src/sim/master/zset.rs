//! A sorted set as Redis orders it: by score, ties by member bytes. Kept as one sorted vector,
//! which is exact and fast for the small queues the locks keep (inserts are O(n)).

use std::cmp::Ordering;

/// Members with their scores, sorted by `(score, member)`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ZSet {
    items: Vec<(f64, Vec<u8>)>,
}

fn order(a_score: f64, a_member: &[u8], b_score: f64, b_member: &[u8]) -> Ordering {
    a_score
        .partial_cmp(&b_score)
        .unwrap_or(Ordering::Equal)
        .then_with(|| a_member.cmp(b_member))
}

impl ZSet {
    /// Number of members.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// `true` when there is no member.
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    fn position(&self, member: &[u8]) -> Option<usize> {
        self.items.iter().position(|(_, m)| m.as_slice() == member)
    }

    /// The score of `member`.
    pub(crate) fn score(&self, member: &[u8]) -> Option<f64> {
        self.position(member).map(|i| self.items[i].0)
    }

    /// Sets `member`'s score; returns `true` when the member is new.
    pub(crate) fn insert(&mut self, score: f64, member: &[u8]) -> bool {
        let new = match self.position(member) {
            Some(i) => {
                if self.items[i].0 == score {
                    return false;
                }
                self.items.remove(i);
                false
            }
            None => true,
        };
        let at = self
            .items
            .partition_point(|(s, m)| order(*s, m, score, member) == Ordering::Less);
        self.items.insert(at, (score, member.to_vec()));
        new
    }

    /// Removes `member`; returns `true` when it was there.
    pub(crate) fn remove(&mut self, member: &[u8]) -> bool {
        match self.position(member) {
            Some(i) => {
                self.items.remove(i);
                true
            }
            None => false,
        }
    }

    /// The members in order, as a slice.
    pub(crate) fn items(&self) -> &[(f64, Vec<u8>)] {
        &self.items
    }
}

#[cfg(test)]
mod tests {
    use super::ZSet;

    #[test]
    fn orders_by_score_then_member() {
        let mut z = ZSet::default();
        assert!(z.insert(2.0, b"b"));
        assert!(z.insert(1.0, b"z"));
        assert!(z.insert(2.0, b"a"));
        assert!(!z.insert(0.5, b"b"));
        let order: Vec<&[u8]> = z.items().iter().map(|(_, m)| m.as_slice()).collect();
        assert_eq!(order, vec![&b"b"[..], b"z", b"a"]);
        assert_eq!(z.score(b"b"), Some(0.5));
        assert!(z.remove(b"z"));
        assert!(!z.remove(b"z"));
        assert_eq!(z.len(), 2);
    }
}
