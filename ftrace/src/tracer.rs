//! Tracers (`current_tracer`) and reading the trace (`cat trace`).
//!
//! `nop` traces nothing; `function` records one event per traced call (the
//! function and its caller) through an ops with the recursion guard, filtered
//! by `set_ftrace_filter` / `set_ftrace_notrace`. Changing the tracer empties
//! the buffer, as Linux does.

use core::fmt::{self, Write};

use arch::context::{self, Context};
use arch::ftrace_abi::FtraceRegs;

use crate::event::{flags, Common, FunctionEvent, TRACE_FN};
use crate::ops::{FtraceOps, OpsFlags};
use crate::registry::{self, FtraceError};
use crate::{buffer, output, symbols};

/// A tracer `current_tracer` can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tracer {
    Nop,
    Function,
}

impl Tracer {
    /// Every tracer, in `available_tracers` order.
    pub const ALL: &'static [Tracer] = &[Tracer::Function, Tracer::Nop];

    /// The tracer's name in tracefs.
    pub fn name(self) -> &'static str {
        match self {
            Tracer::Nop => "nop",
            Tracer::Function => "function",
        }
    }

    /// The tracer called `name`.
    pub fn from_name(name: &str) -> Option<Tracer> {
        Self::ALL.iter().copied().find(|tracer| tracer.name() == name)
    }

    fn start(self) -> Result<(), FtraceError> {
        match self {
            Tracer::Nop => Ok(()),
            Tracer::Function => registry::register(&FUNCTION_OPS),
        }
    }

    fn stop(self) -> Result<(), FtraceError> {
        match self {
            Tracer::Nop => Ok(()),
            Tracer::Function => registry::unregister(&FUNCTION_OPS),
        }
    }
}

static CURRENT: spin::Mutex<Tracer> = spin::Mutex::new(Tracer::Nop);

/// The ops of the function tracer; its filters are `set_ftrace_filter` and
/// `set_ftrace_notrace`.
pub static FUNCTION_OPS: FtraceOps = FtraceOps::new(function_trace_call, OpsFlags::RECURSION);

/// The current tracer.
pub fn current() -> Tracer {
    *CURRENT.lock()
}

/// Switches tracers: stops the old one, empties the buffer, starts the new.
/// If the new one cannot start, the old one is restarted.
pub fn set_current(tracer: Tracer) -> Result<(), FtraceError> {
    let mut current = CURRENT.lock();
    if *current == tracer {
        return Ok(());
    }
    current.stop()?;
    buffer::reset();
    if let Err(error) = tracer.start() {
        let _ = current.start();
        return Err(error);
    }
    *current = tracer;
    Ok(())
}

/// The common header for an event recorded now.
#[inline]
pub fn event_common(kind: u16) -> Common {
    let mut bits = 0;
    if !arch::cpu::interrupts_enabled() {
        bits |= flags::IRQS_OFF;
    }
    if context::current() == Context::Irq {
        bits |= flags::HARDIRQ;
    }
    Common { kind, flags: bits, preempt_count: 0, pid: 0 }
}

extern "C" fn function_trace_call(ip: usize, parent_ip: usize, _ops: &FtraceOps, _fregs: &mut FtraceRegs) {
    let event = FunctionEvent { common: event_common(TRACE_FN), ip: ip as u64, parent_ip: parent_ip as u64 };
    buffer::write(&event.encode());
}

/// Writes `cat trace`: the header, then every recorded event.
pub fn write_trace(out: &mut dyn Write) -> fmt::Result {
    let snapshot = buffer::snapshot();
    output::write_header(out, current().name(), snapshot.stats, 1)?;
    let names = |address: usize| symbols::name_of(address);
    for (time, payload) in snapshot.events() {
        match FunctionEvent::decode(payload) {
            Some(event) => output::write_function(out, snapshot.cpu, time, &event, &names)?,
            None => {
                let common = Common::decode(payload).unwrap_or_default();
                output::write_context(out, snapshot.cpu, time, &common)?;
                writeln!(out, "unknown event type {}", common.kind)?;
            }
        }
    }
    Ok(())
}
