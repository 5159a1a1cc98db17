//! The binary: the `advcalc` command line of the library ([`advcalc::cli::main`]) with
//! mimalloc as the allocator.

use std::process::ExitCode;

// Row groups allocate and free large buffers; mimalloc reuses them instead of returning them
// to the kernel and faulting fresh pages in every time (measured in docs/benchmarks.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    ExitCode::from(advcalc::cli::main(std::env::args_os()))
}
