//! The one IO runtime of the process: a small multi-thread tokio runtime whose workers run
//! object_store's requests (connections pooled across the whole run), and [`block_on`], which
//! the synchronous code (the main thread, rayon's workers) calls to wait for a request.

use std::future::Future;
use std::sync::OnceLock;

use tokio::runtime::{Builder, Handle, Runtime};

/// Worker threads: requests are IO-bound, and rayon already has a thread per core.
const WORKERS: usize = 2;

/// The runtime, started on first use.
pub fn runtime() -> &'static Runtime {
    static IO: OnceLock<Runtime> = OnceLock::new();
    IO.get_or_init(|| {
        Builder::new_multi_thread()
            .worker_threads(WORKERS)
            .thread_name("advcalc-io")
            .enable_all()
            .build()
            // only fails where threads or an epoll instance cannot be made at all
            .expect("cannot start the IO runtime")
    })
}

/// Run `future` to completion on the IO runtime and return its output. Safe from any thread
/// that is not itself inside a tokio runtime (the main thread, rayon's workers, which is
/// every caller in advcalc); from inside one (a caller embedding advcalc in async code),
/// it waits on a scoped thread of its own rather than panicking as `Runtime::block_on` does.
pub fn block_on<F>(future: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    if Handle::try_current().is_err() {
        return runtime().block_on(future);
    }
    std::thread::scope(|s| {
        s.spawn(|| runtime().block_on(future))
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rayon::prelude::*;

    #[test]
    fn one_runtime_serves_rayon_threads_at_once() {
        let sums: Vec<u64> = (0..64u64)
            .into_par_iter()
            .map(|i| {
                block_on(async move {
                    // a task on the runtime's workers, awaited from the rayon thread
                    tokio::spawn(async move { i * 2 }).await.unwrap()
                })
            })
            .collect();
        assert_eq!(sums, (0..64).map(|i| i * 2).collect::<Vec<_>>());
        assert!(std::ptr::eq(runtime(), runtime()));
    }

    #[test]
    fn block_on_from_inside_a_runtime_does_not_panic() {
        let other = Builder::new_current_thread().build().unwrap();
        let v = other.block_on(async { block_on(async { 7 }) });
        assert_eq!(v, 7);
        // and from inside the IO runtime itself
        let v = runtime().block_on(async { block_on(async { 8 }) });
        assert_eq!(v, 8);
    }
}
