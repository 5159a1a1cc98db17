//! What is kept between the passes: the row groups pass 1 decoded, so that pass 2 does not
//! read and decode them again, up to a memory budget (`--memory`).
//!
//! Both passes decode the same projection of every row group (the columns the maths reads);
//! decoding (zstd, then Parquet's list reader) is most of a pass's cost. Pass 1 keeps each
//! decoded record batch while the batches kept so far fit the budget; pass 2 takes a kept
//! batch (freeing its memory) or, beyond the budget, reads the row group again. The bytes out
//! are the same either way: a kept batch is exactly what the second read would return. With a
//! budget of 0 nothing is kept (every row group is read twice, as before).
//!
//! Which row groups end up kept may depend on the order in which the workers finish (the
//! budget is first come, first served); only the speed depends on it, never the output.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow_array::RecordBatch;

use crate::error::Result;
use crate::io::dataset::Dataset;

/// The default budget: 1 GiB. Enough to keep the decoded columns of a few million tokens (a
/// typical training step's dump) on any machine that runs a trainer; larger inputs keep what
/// fits and read the rest twice.
pub const DEFAULT_MEMORY: usize = 1 << 30;

/// Decoded row groups (units of a dataset) kept from pass 1 for pass 2, within a budget.
pub struct Kept {
    budget: usize,
    used: AtomicUsize,
    slots: Vec<Mutex<Option<RecordBatch>>>,
}

impl Kept {
    /// Room for `units` row groups, keeping at most `budget` bytes of decoded Arrow buffers.
    pub fn new(units: usize, budget: usize) -> Self {
        Self {
            budget,
            used: AtomicUsize::new(0),
            slots: (0..units).map(|_| Mutex::new(None)).collect(),
        }
    }

    /// Keep nothing: every pass reads every row group.
    pub fn none() -> Self {
        Self::new(0, 0)
    }

    /// Unit `u` with `projection`: the kept batch when there is one (it stays kept), else
    /// read, and kept if it fits the budget. Every pass before the last one reads this way.
    pub fn read(&self, input: &Dataset, u: usize, projection: &[usize]) -> Result<RecordBatch> {
        if let Some(batch) = self.slot(u).and_then(|s| lock(s).clone()) {
            crate::interrupt::check()?;
            return Ok(batch);
        }
        let batch = input.read_unit(u, Some(projection))?;
        self.keep(u, &batch);
        Ok(batch)
    }

    /// Unit `u` for the last pass: the kept batch, handed over and its memory released, or
    /// read again when it was not kept.
    pub fn take(&self, input: &Dataset, u: usize, projection: &[usize]) -> Result<RecordBatch> {
        let kept = self.slot(u).and_then(|s| lock(s).take());
        match kept {
            Some(batch) => {
                crate::interrupt::check()?;
                self.used.fetch_sub(size(&batch), Ordering::Relaxed);
                Ok(batch)
            }
            None => input.read_unit(u, Some(projection)),
        }
    }

    /// Bytes kept now.
    #[cfg(test)]
    fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// How many row groups are kept now.
    #[cfg(test)]
    fn count(&self) -> usize {
        self.slots.iter().filter(|s| lock(s).is_some()).count()
    }

    fn keep(&self, u: usize, batch: &RecordBatch) {
        let Some(slot) = self.slot(u) else { return };
        let bytes = size(batch);
        // reserve the bytes, or give up if they would pass the budget
        let reserved = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(bytes)
                    .filter(|&total| total <= self.budget)
            });
        if reserved.is_ok() {
            *lock(slot) = Some(batch.clone());
        }
    }

    fn slot(&self, u: usize) -> Option<&Mutex<Option<RecordBatch>>> {
        self.slots.get(u)
    }
}

/// The memory a decoded batch holds (its buffers' capacities).
fn size(batch: &RecordBatch) -> usize {
    batch.get_array_memory_size()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    use crate::io::read::ParquetInput;

    fn demo() -> Dataset {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/demo.parquet");
        Dataset::single(&ParquetInput::open(&path).unwrap())
    }

    #[test]
    fn kept_batches_are_the_ones_a_second_read_returns() {
        let input = demo();
        let projection = [0, 1];
        let kept = Kept::new(input.units().len(), usize::MAX);
        let first = kept.read(&input, 1, &projection).unwrap();
        assert_eq!(kept.count(), 1);
        assert_eq!(kept.used(), size(&first));
        // a second pass before the last one sees the kept batch and keeps it
        assert_eq!(kept.read(&input, 1, &projection).unwrap(), first);
        assert_eq!(kept.count(), 1);
        let taken = kept.take(&input, 1, &projection).unwrap();
        assert_eq!(taken, input.read_unit(1, Some(&projection)).unwrap());
        assert_eq!((kept.count(), kept.used()), (0, 0));
    }

    #[test]
    fn beyond_the_budget_nothing_is_kept_and_the_unit_is_read_again() {
        let input = demo();
        let projection = [0, 1];
        let one = size(&input.read_unit(0, Some(&projection)).unwrap());
        // room for one row group's batch, not two
        let kept = Kept::new(input.units().len(), one + one / 2);
        kept.read(&input, 0, &projection).unwrap();
        kept.read(&input, 1, &projection).unwrap();
        assert_eq!(kept.count(), 1);
        let again = kept.take(&input, 1, &projection).unwrap();
        assert_eq!(again, input.read_unit(1, Some(&projection)).unwrap());
        // a budget of 0 keeps nothing
        let none = Kept::new(input.units().len(), 0);
        none.read(&input, 0, &projection).unwrap();
        assert_eq!((none.count(), none.used()), (0, 0));
    }
}
