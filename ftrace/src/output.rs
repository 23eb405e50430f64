//! `cat trace` output in Linux's format.

use core::fmt::{self, Write};

use crate::event::{flags, Common, FunctionEvent};
use crate::ring_buffer::Stats;

/// Turns an address into a function name, if it is inside one.
pub type Namer<'a> = &'a dyn Fn(usize) -> Option<&'a str>;

/// The header `cat trace` prints before the events.
pub fn write_header(out: &mut dyn Write, tracer: &str, stats: Stats, cpus: usize) -> fmt::Result {
    writeln!(out, "# tracer: {tracer}")?;
    writeln!(out, "#")?;
    writeln!(out, "# entries-in-buffer/entries-written: {}/{}   #P:{cpus}", stats.entries, stats.written)?;
    writeln!(out, "#")?;
    writeln!(out, "#                                _-----=> irqs-off/BH-disabled")?;
    writeln!(out, "#                               / _----=> need-resched")?;
    writeln!(out, "#                              | / _---=> hardirq/softirq")?;
    writeln!(out, "#                              || / _--=> preempt-depth")?;
    writeln!(out, "#                              ||| / _-=> migrate-disable")?;
    writeln!(out, "#                              |||| /     delay")?;
    writeln!(out, "#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION")?;
    writeln!(out, "#              | |         |   |||||     |         |")
}

/// The task column: the boot context is the idle task, pid 0.
fn task_name(pid: i32) -> &'static str {
    if pid == 0 {
        "<idle>"
    } else {
        "<...>"
    }
}

/// The five latency-format flag characters (`d.h..`).
pub fn latency_flags(common: &Common) -> [u8; 5] {
    let irqs = if common.flags & flags::IRQS_OFF != 0 { b'd' } else { b'.' };
    let hard = common.flags & flags::HARDIRQ != 0;
    let soft = common.flags & flags::SOFTIRQ != 0;
    let nmi = common.flags & flags::NMI != 0;
    let context = match (nmi, hard, soft) {
        (true, true, _) => b'Z',
        (true, false, _) => b'z',
        (false, true, true) => b'H',
        (false, true, false) => b'h',
        (false, false, true) => b's',
        _ => b'.',
    };
    let depth = match common.preempt_count & 0xf {
        0 => b'.',
        n => b"0123456789abcdef"[n as usize],
    };
    [irqs, b'.', context, depth, b'.']
}

/// `          <idle>-0       [000] d....    12.345678: `
pub fn write_context(out: &mut dyn Write, cpu: usize, time_ns: u64, common: &Common) -> fmt::Result {
    let flags = latency_flags(common);
    let flags = core::str::from_utf8(&flags).unwrap_or(".....");
    let micros = time_ns / 1_000;
    write!(
        out,
        "{:>16}-{:<7} [{cpu:03}] {flags} {:>5}.{:06}: ",
        task_name(common.pid),
        common.pid,
        micros / 1_000_000,
        micros % 1_000_000
    )
}

/// Writes a symbol name, or the raw address when there is none.
pub fn write_symbol(out: &mut dyn Write, address: usize, names: Namer) -> fmt::Result {
    match names(address) {
        Some(name) => out.write_str(name),
        None => write!(out, "{address:#x}"),
    }
}

/// One function tracer line: `context function <-caller`.
pub fn write_function(out: &mut dyn Write, cpu: usize, time_ns: u64, event: &FunctionEvent, names: Namer) -> fmt::Result {
    write_context(out, cpu, time_ns, &event.common)?;
    write_symbol(out, event.ip as usize, names)?;
    out.write_str(" <-")?;
    write_symbol(out, event.parent_ip as usize, names)?;
    writeln!(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::TRACE_FN;
    use alloc::string::String;

    #[test]
    fn function_line_matches_linux() {
        let names = |address: usize| match address {
            0x1000..=0x105f => Some("kernel::workload::fib"),
            0x2000..=0x207f => Some("kernel::workload::run"),
            _ => None,
        };
        let event = FunctionEvent {
            common: Common { kind: TRACE_FN, flags: flags::IRQS_OFF, preempt_count: 0, pid: 0 },
            ip: 0x1000,
            parent_ip: 0x201c,
        };
        let mut line = String::new();
        write_function(&mut line, 0, 12_345_678_901, &event, &names).unwrap();
        assert_eq!(line, "          <idle>-0       [000] d....    12.345678: kernel::workload::fib <-kernel::workload::run\n");
        let mut unknown = String::new();
        let event = FunctionEvent { parent_ip: 0x9999, ..event };
        write_function(&mut unknown, 1, 0, &event, &names).unwrap();
        assert!(unknown.ends_with("kernel::workload::fib <-0x9999\n"), "{unknown}");
    }

    #[test]
    fn flags_columns() {
        let common = |flags| Common { kind: TRACE_FN, flags, preempt_count: 0, pid: 0 };
        assert_eq!(&latency_flags(&common(0)), b".....");
        assert_eq!(&latency_flags(&common(flags::IRQS_OFF | flags::HARDIRQ)), b"d.h..");
        let mut header = String::new();
        write_header(&mut header, "function", Stats { entries: 15, written: 15, overrun: 0 }, 1).unwrap();
        assert!(header.starts_with("# tracer: function\n#\n# entries-in-buffer/entries-written: 15/15   #P:1\n"));
    }
}
