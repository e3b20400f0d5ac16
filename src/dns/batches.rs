//! Sending a zone's changes to a server that applies each batch all or nothing.

/// The batches of one zone's changes, in order, for a server that applies each batch all or
/// nothing: a batch it rejects for its content is split in halves, and the halves are sent
/// next, until the changes it refuses stand alone and the others have gone through.
pub struct HalvingBatches<'a, T> {
    /// The work list, next batch last.
    pending: Vec<&'a [T]>,
}

impl<'a, T> HalvingBatches<'a, T> {
    pub fn new(changes: &'a [T], batch_size: usize) -> Self {
        Self {
            pending: changes.chunks(batch_size.max(1)).rev().collect(),
        }
    }

    /// Batches of at most `batch_size` changes whose `weight`s add up to at most `max_weight`,
    /// in order; a change heavier than `max_weight` goes alone.
    pub fn packed(
        changes: &'a [T],
        batch_size: usize,
        max_weight: usize,
        weight: impl Fn(&T) -> usize,
    ) -> Self {
        let batch_size = batch_size.max(1);
        let mut pending = Vec::new();
        let (mut start, mut load) = (0, 0);
        for (i, change) in changes.iter().enumerate() {
            let w = weight(change);
            if i > start && (i - start == batch_size || load + w > max_weight) {
                pending.push(&changes[start..i]);
                (start, load) = (i, 0);
            }
            load += w;
        }
        if start < changes.len() {
            pending.push(&changes[start..]);
        }
        pending.reverse();
        Self { pending }
    }

    /// The server refused `batch` for its content. Returns false when it is a single change:
    /// that one is the culprit, to be reported; a larger batch is split and sent again.
    pub fn split_rejected(&mut self, batch: &'a [T]) -> bool {
        if batch.len() < 2 {
            return false;
        }
        let (first, second) = batch.split_at(batch.len() / 2);
        self.pending.push(second);
        self.pending.push(first);
        true
    }
}

impl<'a, T> Iterator for HalvingBatches<'a, T> {
    type Item = &'a [T];

    fn next(&mut self) -> Option<&'a [T]> {
        self.pending.pop()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejected_batches_are_halved_until_the_culprits_stand_alone() {
        let changes: Vec<u32> = (0..10).collect();
        let refused = [3, 8];
        let mut batches = HalvingBatches::new(&changes, 4);
        let (mut applied, mut culprits, mut sent) = (Vec::new(), Vec::new(), Vec::new());
        while let Some(batch) = batches.next() {
            sent.push(batch.to_vec());
            if batch.iter().any(|change| refused.contains(change)) {
                if !batches.split_rejected(batch) {
                    culprits.extend_from_slice(batch);
                }
            } else {
                applied.extend_from_slice(batch);
            }
        }
        assert_eq!(culprits, refused);
        assert_eq!(applied, [0, 1, 2, 4, 5, 6, 7, 9], "the rest, in order");
        assert_eq!(
            sent,
            [
                vec![0, 1, 2, 3],
                vec![0, 1],
                vec![2, 3],
                vec![2],
                vec![3],
                vec![4, 5, 6, 7],
                vec![8, 9],
                vec![8],
                vec![9],
            ]
        );
        let none: [u32; 0] = [];
        assert_eq!(HalvingBatches::packed(&none, 4, 10, |_| 1).count(), 0);
        assert_eq!(HalvingBatches::new(&none, 4).count(), 0);
        assert_eq!(
            HalvingBatches::new(&changes, 0).count(),
            10,
            "a zero size means one"
        );
    }

    #[test]
    fn packed_batches_stop_at_the_count_or_the_weight_whichever_comes_first() {
        let changes: Vec<usize> = vec![3, 3, 3, 1, 1, 1, 1, 1, 9, 12, 2, 2];
        let batches: Vec<&[usize]> = HalvingBatches::packed(&changes, 4, 10, |w| *w).collect();
        assert_eq!(
            batches,
            [&[3, 3, 3, 1][..], &[1, 1, 1, 1], &[9], &[12], &[2, 2],],
            "a weight of 10 and 4 changes at most; 12 alone"
        );
        let mut halving = HalvingBatches::packed(&changes, 100, 100, |w| *w);
        let whole = halving.next().unwrap();
        assert_eq!(whole, &changes[..]);
        assert!(halving.split_rejected(whole));
        assert_eq!(halving.next().unwrap(), &changes[..6]);
        assert_eq!(HalvingBatches::packed(&changes, 0, 100, |w| *w).count(), 12);
    }
}
