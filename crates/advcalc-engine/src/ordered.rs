//! Produce items `0..n` on every worker thread and consume them strictly in index order, as
//! soon as each is ready, on whichever worker is free — the output pass's shape: encode row
//! groups in parallel, append them to the file in order.
//!
//! Unlike alternating "encode a window, append it while encoding the next", no worker waits
//! for a window's slowest row group: a worker takes the next index, or appends what is ready,
//! or (only when `ahead` items already wait) sleeps until something changes.

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex};

use crate::error::{Error, Result};

struct State<T> {
    /// Produced, not yet consumed.
    ready: BTreeMap<usize, T>,
    /// The next index to produce.
    next: usize,
    /// The next index to consume (everything below is done).
    consumed: usize,
    /// A worker is consuming (consumption is sequential).
    consuming: bool,
    /// The failure with the lowest index so far.
    error: Option<(usize, Error)>,
}

impl<T> State<T> {
    fn fail(&mut self, index: usize, e: Error) {
        if self.error.as_ref().is_none_or(|(i, _)| index < *i) {
            self.error = Some((index, e));
        }
    }
}

/// Run `produce(i)` for every `i < n` on the current rayon pool's threads, and
/// `consume(i, item)` in increasing `i`; at most `ahead` items are produced beyond the last
/// consumed one, which bounds memory. Stops at the first failure and returns the failure of
/// the lowest index (every lower index was produced, so the error does not depend on timing).
pub fn produce_in_parallel_consume_in_order<T: Send>(
    n: usize,
    ahead: usize,
    produce: impl Fn(usize) -> Result<T> + Sync,
    consume: impl FnMut(usize, T) -> Result<()> + Send,
) -> Result<()> {
    let ahead = ahead.max(1);
    let state = Mutex::new(State {
        ready: BTreeMap::new(),
        next: 0,
        consumed: 0,
        consuming: false,
        error: None,
    });
    let changed = Condvar::new();
    let consume = Mutex::new(consume);
    let lock = || state.lock().unwrap_or_else(|p| p.into_inner());
    let worker = || {
        let mut st = lock();
        loop {
            if st.error.is_some() || st.consumed == n {
                changed.notify_all();
                return;
            }
            if !st.consuming && st.ready.contains_key(&st.consumed) {
                st.consuming = true;
                loop {
                    let index = st.consumed;
                    let Some(item) = st.ready.remove(&index) else {
                        break;
                    };
                    drop(st);
                    let done = (consume.lock().unwrap_or_else(|p| p.into_inner()))(index, item);
                    st = lock();
                    match done {
                        Ok(()) => st.consumed += 1,
                        Err(e) => {
                            st.fail(index, e);
                            break;
                        }
                    }
                    changed.notify_all();
                }
                st.consuming = false;
                changed.notify_all();
                continue;
            }
            if st.next < n && st.next < st.consumed + ahead {
                let index = st.next;
                st.next += 1;
                drop(st);
                let item = produce(index);
                st = lock();
                match item {
                    Ok(item) => {
                        st.ready.insert(index, item);
                    }
                    Err(e) => st.fail(index, e),
                }
                changed.notify_all();
                continue;
            }
            st = changed.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    };
    rayon::scope(|s| {
        for _ in 0..rayon::current_num_threads().max(1) {
            s.spawn(|_| worker());
        }
    });
    let st = state.into_inner().unwrap_or_else(|p| p.into_inner());
    match st.error {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn pool(threads: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
    }

    #[test]
    fn consumes_in_order_with_bounded_lookahead() {
        for threads in [1, 2, 4] {
            let in_flight = AtomicUsize::new(0);
            let most = AtomicUsize::new(0);
            let mut seen = Vec::new();
            pool(threads)
                .install(|| {
                    produce_in_parallel_consume_in_order(
                        50,
                        3,
                        |i| {
                            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(now, Ordering::SeqCst);
                            // later items finish first, to test the reordering
                            std::thread::sleep(std::time::Duration::from_micros(
                                (50 - i as u64) * 20,
                            ));
                            Ok(i * 10)
                        },
                        |i, item| {
                            in_flight.fetch_sub(1, Ordering::SeqCst);
                            seen.push((i, item));
                            Ok(())
                        },
                    )
                })
                .unwrap();
            assert_eq!(seen, (0..50).map(|i| (i, i * 10)).collect::<Vec<_>>());
            // produced but not consumed never exceeds `ahead`
            assert!(most.load(Ordering::SeqCst) <= 3, "threads {threads}");
        }
    }

    #[test]
    fn the_lowest_failing_index_wins() {
        for threads in [1, 2, 4] {
            let consumed = AtomicUsize::new(0);
            let e = pool(threads).install(|| {
                produce_in_parallel_consume_in_order(
                    40,
                    8,
                    |i| {
                        if i == 17 || i == 23 {
                            // the later failure comes first in time
                            if i == 17 {
                                std::thread::sleep(std::time::Duration::from_millis(5));
                            }
                            Err(Error::data(format!("item {i}")))
                        } else {
                            Ok(i)
                        }
                    },
                    |_, _| {
                        consumed.fetch_add(1, Ordering::SeqCst);
                        Ok(())
                    },
                )
            });
            assert_eq!(e.unwrap_err().message(), "item 17", "threads {threads}");
            // nothing at or after the failure is consumed
            assert!(consumed.load(Ordering::SeqCst) <= 17);
        }
    }

    #[test]
    fn a_failing_consumer_stops_the_run() {
        let e = pool(2).install(|| {
            produce_in_parallel_consume_in_order(10, 2, Ok, |i, _| {
                if i == 4 {
                    Err(Error::data("disk full"))
                } else {
                    Ok(())
                }
            })
        });
        assert_eq!(e.unwrap_err().message(), "disk full");
        assert!(
            pool(2)
                .install(|| produce_in_parallel_consume_in_order(0, 2, Ok, |_, _: usize| Ok(())))
                .is_ok()
        );
    }
}
