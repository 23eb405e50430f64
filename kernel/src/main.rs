//! The kernel: generic start-up, the console shell, the heap, panics and the
//! in-kernel test framework. Everything architecture-specific is reached
//! through the `arch` crate; nothing here names an architecture.
#![no_std]
#![no_main]
#![feature(custom_test_frameworks)]
#![test_runner(crate::testing::run_tests)]
#![reexport_test_harness_main = "test_main"]
#![feature(patchable_function_entry)]

extern crate alloc;

mod backtrace;
mod bench;
mod cmdline;
mod console;
mod error_log;
mod heap;
mod panic;
mod record;
mod sched;
mod shell;
mod stress;
#[cfg(test)]
mod testing;
mod tick;
mod tour;
mod tracefs;
mod workload;

#[cfg(test)]
mod tests;

pub use arch::{print, println};

/// Entered from the architecture's boot code with the console, exceptions,
/// page tables and timer ready and interrupts enabled: the boot CPU becomes
/// the first task, tracing starts, then the other CPUs.
#[no_mangle]
pub fn kernel_main() -> ! {
    boot::linked();
    heap::init();
    sched::init();
    tick::init();
    println!();
    println!("ktrace kernel {} on {}: a teaching kernel for function tracing", env!("CARGO_PKG_VERSION"), arch::NAME);
    start_tracing();
    let wanted = cmdline::option("smp").and_then(|n| n.parse().ok()).unwrap_or(arch::MAX_CPUS);
    let online = sched::start_cpus(wanted);
    println!("smp: {online} CPUs online");
    record::start_if_recording();
    #[cfg(test)]
    test_main();
    match cmdline::option("bench") {
        Some("") => {
            if let Err(error) = bench::run() {
                println!("{error}");
                arch::exit(arch::ExitCode::Failure);
            }
        }
        Some("vs-linux") => {
            if let Err(error) = bench::vs_linux::run(&[]) {
                println!("vso-error {error}");
                arch::exit(arch::ExitCode::Failure);
            }
        }
        Some(other) => println!("bench: no benchmark '{other}' (bench, bench=vs-linux)"),
        None => {}
    }
    if cmdline::option("bench").is_some() {
        arch::exit(arch::ExitCode::Success);
    }
    shell::run()
}

/// Starts the trace arrays (clock, buffers), then checks the symbol and
/// site tables and readies function tracing. Without them the kernel still
/// runs; the tracing files then report why.
fn start_tracing() {
    trace::init();
    match ftrace::init() {
        Ok(info) => {
            arch::print::set_symbolizer(ftrace::symbols::kernel::write_address);
            trace::output::read::set_event_printer(probe_events::events::print_event);
            trace::output::read::set_event_format(probe_events::events::format_of);
            println!("ftrace: {} patchable functions, {} symbols", info.sites, info.symbols);
        }
        Err(error) => println!("ftrace: {error}"),
    }
}
