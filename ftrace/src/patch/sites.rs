//! One [`Site`] per patchable function, and the verified patching of one
//! site.
//!
//! A site is a function `F` with an ops literal at `F-8` and a call slot at
//! `F + arch::ftrace::CALL_OFFSET` (see the architecture's `ftrace` module).
//! A `Site` remembers what the slot and the literal hold *now*, so every
//! patch can state what it expects to find. When the bytes in place differ,
//! the patch is refused, a report names the function, the bytes found, the
//! bytes expected and what was being done, and the site is taken out of
//! service: it is quiesced (back to its NOP, or its literal pointed at the
//! empty call, so it never leads to an ops that may be freed) and not
//! updated again.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use core::fmt;

use arch::ftrace::{self as site, Insn, CALL_OFFSET, LITERAL_NOPS, NOP};
use arch::ftrace_abi::{trampoline_address, OutOfRange, SiteCall, Trampoline};
use arch::println;
use arch::text::{PatchError, TextPatcher};

use crate::ops::{SiteList, NOP_CALL};

/// Bytes between a table entry and its function: the ops literal.
pub(crate) const LITERAL_SIZE: usize = crate::patch::geometry::LITERAL_BYTES;

/// One patchable site.
pub(crate) struct Site {
    /// The function's address.
    pub ip: usize,
    /// Its name in the symbol table.
    pub name: &'static str,
    /// What the call slot holds: the NOP, or a call to a trampoline.
    pub call: Option<Trampoline>,
    /// What the literal holds (the compiler's NOPs until first enabled).
    pub literal: u64,
    /// How many ops trace this site.
    pub ops_count: u32,
    /// Whether an IPMODIFY ops traces it.
    pub ipmodify: bool,
    /// The list the literal points at when several ops trace the site.
    pub list: Option<Box<SiteList>>,
    /// Out of service after a refused patch.
    pub failed: bool,
    /// Whether an ops ever traced it since boot (`touched_functions`).
    pub touched: bool,
}

impl Site {
    pub fn new(ip: usize, name: &'static str) -> Site {
        Site {
            ip,
            name,
            call: None,
            literal: LITERAL_NOPS,
            ops_count: 0,
            ipmodify: false,
            list: None,
            failed: false,
            touched: false,
        }
    }

    fn call_slot(&self) -> usize {
        self.ip + CALL_OFFSET
    }

    fn literal_slot(&self) -> usize {
        self.ip - LITERAL_SIZE
    }

    /// Whether the literal names an ops or a per-site list.
    pub(crate) fn literal_names_ops(&self) -> bool {
        self.literal != LITERAL_NOPS && self.literal != &NOP_CALL as *const SiteCall as u64
    }

    /// The instruction the call slot holds for `call`; `Err` when the
    /// trampoline is out of the call instruction's reach.
    fn insn(&self, call: Option<Trampoline>) -> Result<Insn, OutOfRange> {
        match call {
            None => Ok(NOP),
            Some(trampoline) => site::call_insn(self.call_slot(), trampoline_address(trampoline)),
        }
    }
}

/// What a patch was doing, for reports.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Action {
    Prepare,
    Enable(Trampoline),
    Switch(Trampoline, Trampoline),
    Disable(Trampoline),
    SetLiteral,
}

fn trampoline_name(trampoline: Trampoline) -> &'static str {
    match trampoline {
        Trampoline::Args => "ftrace_caller",
        Trampoline::Regs => "ftrace_regs_caller",
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Action::Prepare => write!(f, "preparing the site at boot"),
            Action::Enable(t) => write!(f, "enabling (nop -> call {})", trampoline_name(t)),
            Action::Switch(a, b) => write!(f, "switching (call {} -> call {})", trampoline_name(a), trampoline_name(b)),
            Action::Disable(t) => write!(f, "disabling (call {} -> nop)", trampoline_name(t)),
            Action::SetLiteral => write!(f, "setting the ops literal"),
        }
    }
}

/// Queues `expected` -> `new` at `addr` (the literal as data, anything else
/// as an instruction), or reports the refusal and takes the site out of
/// service.
fn patch(patcher: &mut TextPatcher, site: &mut Site, action: Action, addr: usize, expected: &[u8], new: &[u8]) -> bool {
    let queued = match action {
        Action::SetLiteral => patcher.replace_data(addr, expected, new),
        _ => patcher.replace(addr, expected, new),
    };
    match queued {
        Ok(()) => true,
        Err(error) => {
            refuse(site, action, addr, expected, error);
            false
        }
    }
}

/// The most recent refusal report, for tests.
static LAST_REFUSAL: spin::Mutex<Option<String>> = spin::Mutex::new(None);

/// The most recent refusal report (`ftrace: refusing to patch ...`).
pub fn last_refusal() -> Option<String> {
    LAST_REFUSAL.lock().clone()
}

fn report(site: &mut Site, message: String) {
    site.failed = true;
    println!("{message}");
    *LAST_REFUSAL.lock() = Some(message);
}

fn refuse(site: &mut Site, action: Action, addr: usize, expected: &[u8], error: PatchError) {
    let mut expected_text = String::new();
    let _ = arch::text::write_bytes(&mut expected_text, expected);
    let message = format!(
        "ftrace: refusing to patch {} at {addr:#x} while {action}: {error}, expected{expected_text}; site taken out of service",
        site.name
    );
    report(site, message);
}

/// Applies the boot-time preparation (aarch64: `nop` -> `mov x9, x30`).
pub(crate) fn prepare(patcher: &mut TextPatcher, site: &mut Site) {
    for (offset, compiled, prepared) in site::PREPARE {
        if !patch(patcher, site, Action::Prepare, site.ip + offset, compiled, prepared) {
            return;
        }
    }
}

/// Moves a site to `call` with `literal`, literal first (so an enabled call
/// never finds a stale literal). Returns whether the site is now in that
/// state (false: refused and out of service).
/// `literal` is the address of the [`SiteCall`] the literal must hold.
///
/// [`SiteCall`]: arch::ftrace_abi::SiteCall
pub(crate) fn set_state(patcher: &mut TextPatcher, site: &mut Site, call: Option<Trampoline>, literal: u64) -> bool {
    let done = move_to(patcher, site, call, literal);
    if !done {
        quiesce(patcher, site);
    }
    done
}

fn move_to(patcher: &mut TextPatcher, site: &mut Site, call: Option<Trampoline>, literal: u64) -> bool {
    if call.is_some() && site.literal != literal {
        let old = site.literal.to_ne_bytes();
        if !patch(patcher, site, Action::SetLiteral, site.literal_slot(), &old, &literal.to_ne_bytes()) {
            return false;
        }
        site.literal = literal;
    }
    if site.call != call {
        let action = match (site.call, call) {
            (None, Some(t)) => Action::Enable(t),
            (Some(a), Some(b)) => Action::Switch(a, b),
            (Some(a), None) => Action::Disable(a),
            (None, None) => unreachable!("site.call != call"),
        };
        let (old, new) = match (site.insn(site.call), site.insn(call)) {
            (Ok(old), Ok(new)) => (old, new),
            (_, Err(range)) | (Err(range), _) => {
                let message = format!(
                    "ftrace: refusing to patch {} while {action}: {:#x} is out of the call's reach from {:#x}; site taken out of service",
                    site.name, range.to, range.from
                );
                report(site, message);
                return false;
            }
        };
        if !patch(patcher, site, action, site.call_slot(), &old, &new) {
            return false;
        }
        site.call = call;
    }
    if call.is_none() && site.literal != literal {
        let old = site.literal.to_ne_bytes();
        if !patch(patcher, site, Action::SetLiteral, site.literal_slot(), &old, &literal.to_ne_bytes()) {
            return false;
        }
        site.literal = literal;
    }
    true
}

/// Makes a refused site lead to no ops ever again: the ops its literal
/// names may be unregistered and freed, and an out-of-service site is not
/// updated any more. Puts the NOP back in the call slot if the slot still
/// holds what the site says, and points the literal at the empty call
/// either way (a refused enable has already set it, and its slot holds
/// something unknown). A site where both are refused stays as it is, and
/// says so.
fn quiesce(patcher: &mut TextPatcher, site: &mut Site) {
    site.ops_count = 0;
    site.ipmodify = false;
    if let Some(current) = site.call {
        if let (Ok(old), Ok(nop)) = (site.insn(Some(current)), site.insn(None)) {
            if patcher.replace(site.call_slot(), &old, &nop).is_ok() {
                site.call = None;
            }
        }
    }
    let empty = &NOP_CALL as *const SiteCall as u64;
    if site.literal == empty {
        return;
    }
    let (old, new) = (site.literal.to_ne_bytes(), empty.to_ne_bytes());
    match patcher.replace_data(site.literal_slot(), &old, &new) {
        Ok(()) => site.literal = empty,
        Err(error) => println!("ftrace: {} still calls the trampoline with an unknown literal: {error}", site.name),
    }
}
