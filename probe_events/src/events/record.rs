//! The traced path of probe events: the handlers an event's fprobe, kprobe
//! or kretprobe runs, the fetches, and the record written straight into the
//! ring buffer. No allocation and no lock: everything it reads was built
//! when the event was defined ([`super::compiled`]).
//!
//! A hit takes one of three paths ([`record`]): a record of word fields
//! written by a writer made for its shape ([`write_words`]), another record
//! of fixed size fetched in place ([`record_fixed`]), or, when strings,
//! a filter, triggers, a pid filter or instances need the values first,
//! [`record_by_values`].

use alloc::sync::Arc;
use core::sync::atomic::Ordering;

use arch::ftrace_abi::{FtraceRegs, PtRegs, Saved, SavedRegs};
use kprobes::kretprobe::Kretprobe;
use kprobes::Kprobe;
use trace::array::options::TraceOption;
use trace::events::filter::FieldValue;
use trace::events::record::event_common;
use trace::events::trigger::{Phase, StackStart};

use super::compiled::{filter_value, Compiled, Fetch, Quick};
use crate::definition::{self, ArgType};
use crate::layout::{Value, WordRecord, MAX_RECORD, MAX_STRING};
use fprobe::{self as probe, EntryData, Fprobe};

/// What fetches read from.
pub(super) struct Context<'a> {
    regs: SavedRegs<'a>,
    /// The entry arguments saved for an exit event.
    saved_args: Option<&'a EntryData<'a>>,
    /// Where the probed function returns to (0: not known, as at a
    /// kprobe inside a function): a `stacktrace` trigger's first caller.
    caller: usize,
    /// The kprobe that hit, for a kprobe event: at a function's entry or
    /// early in its prologue (no frame record of its own yet), its caller
    /// is read from the save, on the slow path only.
    kprobe: Option<&'a Kprobe>,
}

#[inline]
fn fetch_word(fetch: &Fetch, context: &Context) -> Option<u64> {
    match fetch {
        Fetch::Arg(n) => match context.saved_args {
            Some(data) => data.argument(*n),
            None => context.regs.argument(*n),
        },
        Fetch::Retval => Some(context.regs.return_value()),
        Fetch::Stack(n) => arch::fault::read_u64_nofault(context.regs.stack_pointer() + 8 * n),
        Fetch::StackPointer => Some(context.regs.stack_pointer() as u64),
        Fetch::Comm => ftrace::task::try_current().map(|task| task.comm_bytes().as_ptr() as u64),
        Fetch::Register(offset) => context.regs.register_at(*offset),
        Fetch::Immediate(value) => Some(*value),
        Fetch::Memory { offset, base } => {
            let address = fetch_word(base, context)?.wrapping_add(*offset as u64);
            arch::fault::read_u64_nofault(address as usize)
        }
    }
}

/// The address a typed read should use: the memory address for `+OFFS(...)`,
/// the value itself for a string or a plain source read as a pointer.
fn fetch_address(fetch: &Fetch, context: &Context) -> Option<u64> {
    match fetch {
        Fetch::Memory { offset, base } => Some(fetch_word(base, context)?.wrapping_add(*offset as u64)),
        other => fetch_word(other, context),
    }
}

/// Reads a NUL-terminated string of at most [`MAX_STRING`] bytes at
/// `address` into `buffer`; `None` if the first byte faults.
fn read_string(address: usize, buffer: &mut [u8]) -> Option<usize> {
    let limit = buffer.len().min(MAX_STRING);
    for (i, slot) in buffer[..limit].iter_mut().enumerate() {
        let mut byte = [0u8];
        if arch::fault::read_nofault(address + i, &mut byte).is_err() {
            return (i > 0).then_some(i);
        }
        if byte[0] == 0 {
            return Some(i);
        }
        *slot = byte[0];
    }
    Some(limit)
}

/// Writes `symstr`'s string for `address` (`function+0xOFF/0xSIZE`, or the
/// address in hex when no symbol holds it) into `buffer`, cut at its end
/// (and at [`MAX_STRING`]); answers its length.
fn write_symstr(address: usize, buffer: &mut [u8]) -> usize {
    struct Cut<'a> {
        buffer: &'a mut [u8],
        len: usize,
    }
    impl core::fmt::Write for Cut<'_> {
        fn write_str(&mut self, text: &str) -> core::fmt::Result {
            let room = self.buffer.len().min(MAX_STRING) - self.len;
            let take = text.len().min(room);
            self.buffer[self.len..self.len + take].copy_from_slice(&text.as_bytes()[..take]);
            self.len += take;
            Ok(())
        }
    }
    let names = |address: usize| ftrace::symbols::kernel::table().ok()?.lookup(address);
    let mut cut = Cut { buffer, len: 0 };
    let _ = trace::output::write_code_address(&mut cut, address, &names);
    cut.len
}

/// Records one event: `ips` is `[ip]` at entry, `[func, ret_ip]` at exit.
#[inline(always)]
fn record(compiled: &Compiled, ips: &[u64], context: &Context) {
    if !compiled.fast.load(Ordering::Relaxed) || trace::events::pid::is_active() {
        return record_by_values(compiled, ips, context);
    }
    match &compiled.words {
        Some(words) => {
            let ips = [ips.first().copied().unwrap_or(0), ips.get(1).copied().unwrap_or(0)];
            (words.write)(compiled, &words.fields, ips, context)
        }
        None => record_fixed(compiled, ips, context),
    }
}

/// [`record`] for a record of word fields ([`WordRecord`]'s shape `EXIT`,
/// `N`): the function tracer's kind of record, every size a constant.
#[inline(never)]
pub(super) fn write_words<const EXIT: bool, const N: usize>(
    compiled: &Compiled,
    fields: &[Quick],
    ips: [u64; 2],
    context: &Context,
) {
    let Ok(fields) = <&[Quick; N]>::try_from(fields) else { return };
    // The header before the write: inside it interrupts are masked.
    let common = event_common(compiled.id);
    trace::array::instances::top().buffer().write_with(WordRecord::<EXIT, N>::SIZE, |_, out| {
        WordRecord::<EXIT, N>::encode(common, ips, |i| fetch_quick(fields[i], context), out)
    });
}

/// [`record`] for other records of fixed size, each value fetched straight
/// into its place in the ring buffer. Out of line, and with no other path
/// in it: so built, the compiler inlines the ring write's closure into it
/// (measured: 30 instructions fewer than with the tests of [`record`]
/// inside).
#[inline(never)]
fn record_fixed(compiled: &Compiled, ips: &[u64], context: &Context) {
    let layout = &compiled.layout;
    // The header before the write: inside it interrupts are masked, which
    // the header's irqs-off flag must not show.
    let common = event_common(compiled.id);
    trace::array::instances::top().buffer().write_with(layout.fixed_size, |_, out| {
        if layout.encode_head(common, ips, out) {
            layout.encode_numbers(&compiled.fetches, |(fetch, _), ty| fetch_number(fetch, ty, context), out);
        }
    });
}

/// A [`Quick`] fetch's value; `None` where [`fetch_word`] would fault.
#[inline(always)]
fn fetch_quick(fetch: Quick, context: &Context) -> Option<u64> {
    match fetch {
        Quick::Arg(n) => context.regs.register_argument(n),
        Quick::SavedArg(n) => context.saved_args?.argument(n),
        Quick::Retval => Some(context.regs.return_value()),
    }
}

/// A number-typed fetch arg's value; `None` if a memory read faulted.
#[inline(always)]
fn fetch_number(fetch: &Fetch, ty: ArgType, context: &Context) -> Option<u64> {
    fetch_word_of(fetch, ty, context).map(|word| ty.extract(word))
}

/// [`fetch_number`]'s word, before a bitfield's bits are taken out.
#[inline(always)]
fn fetch_word_of(fetch: &Fetch, ty: ArgType, context: &Context) -> Option<u64> {
    // The usual fetches first, without the general (recursive, out of line)
    // `fetch_word`.
    match (fetch, context.saved_args) {
        (Fetch::Arg(n), None) => return context.regs.argument(*n),
        (Fetch::Retval, _) => return Some(context.regs.return_value()),
        (Fetch::Memory { .. }, _) => {}
        _ => return fetch_word(fetch, context),
    }
    let mut bytes = [0u8; 8];
    let address = fetch_address(fetch, context)?;
    arch::fault::read_nofault(address as usize, &mut bytes[..ty.size()]).ok()?;
    Some(u64::from_ne_bytes(bytes))
}

/// [`record`] for an event with string fetch args (their lengths make the
/// record's), a filter or triggers (they need the values), a disabled
/// event with triggers, an event enabled in an instance, or while
/// `set_event_pid` or `set_event_notrace_pid` is set: everything is
/// fetched first. Out of line: its buffers would weigh on the common
/// case's frame.
#[inline(never)]
fn record_by_values(compiled: &Compiled, ips: &[u64], context: &Context) {
    let triggered = compiled.triggers.is_set();
    // `set_event_pid` gates the record and the triggers acting after it
    // (see `trace::events::sched`'s `record_with_triggers`).
    let pid_kept = trace::events::pid::records_current();
    let records = compiled.records() && pid_kept;
    let in_instances = !compiled.arrays.is_empty();
    if !records && !triggered && !in_instances {
        return;
    }
    let mut strings = [0u8; MAX_RECORD];
    let mut used = 0;
    // Arrays are read into the end of `strings`, strings into its start:
    // the strings' budget ends where the fixed part's room begins, and the
    // arrays are part of the fixed part, so the two never meet.
    let mut arrays_used = 0;
    // Strings share what the record has left after its fixed part and one
    // NUL each: a late string is cut short rather than the event dropped.
    let string_fields = compiled.fetches.iter().filter(|(_, ty)| ty.is_string()).count();
    let budget = MAX_RECORD.saturating_sub(compiled.layout.fixed_size + string_fields);
    let mut values = [Value::Fault; definition::MAX_ARGS];
    // First the numbers and where each string goes; then the string slices,
    // once `strings` is no longer written.
    let mut spans = [(0usize, 0usize); definition::MAX_ARGS];
    for (i, (fetch, ty)) in compiled.fetches.iter().enumerate() {
        values[i] = match ty {
            ArgType::String => match fetch_address(fetch, context)
                .and_then(|address| read_string(address as usize, &mut strings[used..budget.max(used)]))
            {
                Some(len) => {
                    spans[i] = (used, len);
                    used += len;
                    Value::Str(&[])
                }
                None => Value::Fault,
            },
            _ if compiled.layout.fields[i].count > 0 => {
                // An array: its bytes as memory holds them, kept with the
                // strings' (its field is fixed size, so it takes none of
                // their budget: the space is `strings`' tail).
                let size = compiled.layout.fields[i].size();
                let end = strings.len() - arrays_used;
                let start = end - size;
                match fetch_address(fetch, context) {
                    Some(address)
                        if start >= used && arch::fault::read_nofault(address as usize, &mut strings[start..end]).is_ok() =>
                    {
                        arrays_used += size;
                        spans[i] = (start, size);
                        Value::Array(&[])
                    }
                    _ => Value::Fault,
                }
            }
            ArgType::SymStr => match fetch_number(fetch, ArgType::Symbol, context) {
                Some(address) => {
                    let len = write_symstr(address as usize, &mut strings[used..budget.max(used)]);
                    spans[i] = (used, len);
                    used += len;
                    Value::Str(&[])
                }
                None => Value::Fault,
            },
            _ => fetch_number(fetch, *ty, context).map_or(Value::Fault, Value::Int),
        };
    }
    let count = compiled.fetches.len();
    for i in 0..count {
        let (start, len) = spans[i];
        match values[i] {
            Value::Str(_) => values[i] = Value::Str(&strings[start..start + len]),
            Value::Array(_) => values[i] = Value::Array(&strings[start..start + len]),
            _ => {}
        }
    }
    let common = event_common(compiled.id);
    let fixed = 1 + ips.len();
    let fields = |field| match field {
        0 => FieldValue::Signed(common.pid.into()),
        n if n < fixed => FieldValue::Unsigned(ips[n - 1]),
        n => filter_value(compiled.fetches[n - fixed].1, values[n - fixed]),
    };
    // An entry's chain: the function, then its caller; an exit's: the
    // caller it returns to. Then the frame records.
    // Read from the save, the return address may already lead to a return
    // trampoline (a graph tracer or an exit probe hooked the call first):
    // the hooked call was recorded under this frame pointer, the caller's.
    let caller = match context.kprobe.and_then(|probe| probe.place().before_frame) {
        Some(slot) => context
            .regs
            .return_address_in(slot)
            .map_or(0, |address| ftrace::graph::retstack::resolve_return_address(address, context.regs.frame_pointer())),
        None => context.caller,
    };
    let addresses = match ips {
        [ip] => [*ip as usize, caller],
        _ => [caller, 0],
    };
    let stack = StackStart { addresses, fp: context.regs.frame_pointer() };
    let top = trace::array::instances::top();
    if triggered {
        compiled.triggers.fire(top, Phase::BeforeRecord, &fields, stack);
    }
    // Filled once, written into the top level and each instance that
    // records the event.
    let to_top = records && compiled.filter.passes(&fields);
    if to_top || in_instances {
        let mut out = [0u8; MAX_RECORD];
        let len = compiled.layout.encode(common, ips, &values[..count], &mut out);
        let record = &out[..len];
        if len > 0 && to_top && top.buffer().write(record) && top.option(TraceOption::StackTrace) {
            stack.record(top);
        }
        if in_instances {
            let pid_kept = trace::events::pid::records_current_in;
            compiled.arrays.hit(&pid_kept, &fields, stack, len, &|payload| payload.put_slice(0, record));
        }
    }
    if triggered && pid_kept {
        compiled.triggers.fire(top, Phase::AfterRecord, &fields, stack);
    }
}

fn compiled_of(fp: &Fprobe) -> &Compiled {
    // SAFETY: `set_enabled` sets the private data to an `Arc<Compiled>`
    // reference the probe owns until it is freed, after its handlers.
    unsafe { &*(fp.private() as *const Compiled) }
}

/// Drops the reference `set_enabled` gave a probe.
pub(super) fn release_compiled(private: usize) {
    // SAFETY: `private` came from `Arc::into_raw` in `set_enabled`, and is
    // released once (the probe's free, or a failed registration).
    drop(unsafe { Arc::from_raw(private as *const Compiled) });
}

/// A kprobe event's handler: the probe's private data is its compiled form.
pub(super) fn kprobe_hit(probe: &Kprobe, regs: &PtRegs) {
    // SAFETY: `arm` made the private data a pointer to the event's compiled
    // form, which the event keeps alive past the probe's unregistration.
    let compiled = unsafe { &*(probe.private() as *const Compiled) };
    compiled.hits.fetch_add(1, Ordering::Relaxed);
    let regs = SavedRegs::full(regs, Saved::EntryFull);
    record(compiled, &[probe.address() as u64], &Context { regs, saved_args: None, caller: 0, kprobe: Some(probe) });
}

/// A kretprobe event's entry handler: keeps the arguments for `$argN`.
pub(super) fn kretprobe_save_args(_: &Kretprobe, regs: &PtRegs, data: &mut [u64]) {
    let regs = SavedRegs::full(regs, Saved::EntryFull);
    for (n, slot) in data.iter_mut().enumerate() {
        *slot = regs.argument(n).unwrap_or(0);
    }
}

/// A kretprobe event's return handler.
pub(super) fn kretprobe_return(rp: &Kretprobe, ret_addr: usize, regs: &PtRegs, data: &[u64]) {
    // SAFETY: as in `kprobe_hit`.
    let compiled = unsafe { &*(rp.private() as *const Compiled) };
    compiled.hits.fetch_add(1, Ordering::Relaxed);
    let regs = SavedRegs::full(regs, Saved::ReturnFull);
    let saved = EntryData::of_arguments(data);
    let ips = [rp.place().address as u64, ret_addr as u64];
    record(compiled, &ips, &Context { regs, saved_args: Some(&saved), caller: ret_addr, kprobe: None });
}

/// An fprobe event's handlers, run inline in the probe's entry and return.
pub(super) struct EventHandlers;

impl probe::Handlers for EventHandlers {
    #[inline(always)]
    fn entry(fp: &Fprobe, entry_ip: usize, ret_ip: usize, fregs: &mut FtraceRegs, data: &mut EntryData) -> bool {
        event_entry(fp, entry_ip, ret_ip, fregs, data)
    }

    #[inline(always)]
    fn exit(fp: &Fprobe, entry_ip: usize, ret_ip: usize, fregs: &mut FtraceRegs, data: &mut EntryData) {
        event_exit(fp, entry_ip, ret_ip, fregs, data);
    }
}

#[inline(always)]
pub(super) fn event_entry(fp: &Fprobe, entry_ip: usize, ret_ip: usize, fregs: &mut FtraceRegs, _data: &mut EntryData) -> bool {
    record(compiled_of(fp), &[entry_ip as u64], &Context { regs: fregs.view(), saved_args: None, caller: ret_ip, kprobe: None });
    true
}

#[inline(always)]
pub(super) fn event_exit(fp: &Fprobe, entry_ip: usize, ret_ip: usize, fregs: &mut FtraceRegs, data: &mut EntryData) {
    let data: &EntryData = data;
    let context = Context { regs: fregs.view(), saved_args: Some(data), caller: ret_ip, kprobe: None };
    record(compiled_of(fp), &[entry_ip as u64, ret_ip as u64], &context);
}
