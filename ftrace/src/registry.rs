//! Registering ops and keeping every site patched to match.
//!
//! The registry owns the site table and the registered ops. Every change
//! (register, unregister, a filter change, `ftrace_enabled`) runs one update:
//!
//! 1. the *candidates* are the sites whose set of ops may have changed:
//!    what the changed ops traced before, plus what it traces now;
//! 2. a *plan* computes, for each candidate, its ops count, trampoline (REGS
//!    if any of its ops wants registers) and literal (the one ops, or a new
//!    per-site list), and refuses the whole change (touching nothing) if two
//!    IPMODIFY ops would share a function;
//! 3. one patch batch applies the plan to the sites whose state differs, and
//!    only to them.
//!
//! Updates run in normal context only, never from a callback (the registry
//! lock is not interrupt-safe and a callback must not patch its own caller).
//! Per-site lists replaced by an update are retired: freed after a grace
//! period (`crate::deferred`), since a trampoline may have loaded one just
//! before its site changed.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;

use arch::context::{self, Context};
use arch::ftrace_abi::{SiteCall, Trampoline};
use arch::sync::Mutex;
use arch::text::TextPatcher;

use crate::ops::{FtraceOps, OpsFlags, SiteList, NOP_CALL};
use crate::patch::bitmap::Bitmap;
use crate::patch::plan::{self, Call, PlanOps};
use crate::patch::sites::{self, Site, LITERAL_SIZE};
use crate::symbols::glob::{apply_filter, FilterMode, FunctionFilterError};
use crate::symbols::kernel as symbols;
use crate::symbols::table::KallsymsError;
use crate::{deferred, recursion};

/// Why a tracing request was refused. Nothing changed when one is returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FtraceError {
    /// Tracing could not start at boot (no symbol table, a bad site table).
    Unavailable(&'static str),
    AlreadyRegistered,
    NotRegistered,
    Filter(FunctionFilterError),
    /// An address given to a filter is not a patchable function.
    NotTraceable(usize),
    /// Two IPMODIFY ops would trace this function.
    IpModifyConflict(&'static str),
    /// `ftrace_enabled` cannot go off while a PERMANENT ops is registered.
    PermanentOpsRegistered,
    /// A PERMANENT ops cannot register while `ftrace_enabled` is off.
    TracingDisabled,
    /// Called from an interrupt, an exception or a tracing callback, or
    /// with interrupts masked (patching waits for every CPU).
    WrongContext,
}

impl fmt::Display for FtraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FtraceError::Unavailable(why) => write!(f, "function tracing unavailable: {why}"),
            FtraceError::AlreadyRegistered => write!(f, "ops already registered"),
            FtraceError::NotRegistered => write!(f, "ops not registered"),
            FtraceError::Filter(error) => write!(f, "{error}"),
            FtraceError::NotTraceable(address) => write!(f, "{address:#x} is not a traceable function"),
            FtraceError::IpModifyConflict(name) => {
                write!(f, "{name} already has an ops that modifies the instruction pointer")
            }
            FtraceError::PermanentOpsRegistered => write!(f, "a permanent ops is registered"),
            FtraceError::TracingDisabled => write!(f, "function tracing is disabled (ftrace_enabled is 0)"),
            FtraceError::WrongContext => write!(f, "tracing can only be changed from normal context"),
        }
    }
}

impl From<FunctionFilterError> for FtraceError {
    fn from(error: FunctionFilterError) -> Self {
        FtraceError::Filter(error)
    }
}

/// Update counters, for tests and the curious.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UpdateStats {
    /// Updates run.
    pub updates: u64,
    /// Sites whose bytes an update changed.
    pub sites_patched: u64,
    /// Sites taken out of service.
    pub sites_refused: u64,
}

struct Registered {
    ops: &'static FtraceOps,
    /// The sites it traces (filter minus notrace).
    effective: Bitmap,
}

struct Registry {
    sites: Vec<Site>,
    registered: Vec<Registered>,
    enabled: bool,
    stats: UpdateStats,
    /// How long `init` took to build (and prepare) the site table, in ns.
    boot_update_ns: u64,
}

/// A candidate's computed state.
struct Desired {
    index: usize,
    call: Option<Trampoline>,
    ops_count: u32,
    ipmodify: bool,
    /// The new list, when several ops trace the site and the old one differs.
    list: Option<Box<SiteList>>,
    single: Option<&'static FtraceOps>,
}

/// The registry, behind a sleeping mutex: an update (planning thousands of
/// sites, patching them) is long, and only ever runs in task context.
static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

/// What `init` found.
#[derive(Clone, Copy, Debug)]
pub struct InitInfo {
    pub sites: usize,
    pub symbols: usize,
}

fn site_table_error(what: &'static str) -> FtraceError {
    FtraceError::Unavailable(what)
}

/// Checks the symbol and site tables and builds the site table; on aarch64 also
/// prepares every site (first NOP -> `mov x9, x30`). Called once at boot.
pub fn init() -> Result<InitInfo, FtraceError> {
    let start = arch::timer::cycles();
    let table = symbols::table().map_err(|error| {
        FtraceError::Unavailable(match error {
            KallsymsError::Missing => "no symbol table (tools/ksyms did not run on this image)",
            KallsymsError::Unsorted => "symbol table not sorted",
            _ => "symbol table corrupt",
        })
    })?;
    let sites = arch::layout::patchable_sites();
    let count = table.site_count();
    if count > sites.len() {
        return Err(site_table_error("site count exceeds the patchable-entry table"));
    }
    let (valid, rest) = sites.split_at(count);
    if valid.windows(2).any(|pair| pair[0] >= pair[1]) || valid.first() == Some(&0) {
        return Err(site_table_error("patchable-entry table not sorted"));
    }
    if rest.iter().any(|&entry| entry != 0) {
        return Err(site_table_error("patchable-entry table has entries past its count"));
    }
    // The ops literal is stored and loaded whole, as one aligned word (the
    // build aligns functions so that it is).
    if valid.iter().any(|&entry| !(entry as usize).is_multiple_of(LITERAL_SIZE)) {
        return Err(site_table_error("a site's ops literal is not aligned"));
    }
    let mut sites = Vec::with_capacity(count);
    for &entry in valid {
        let ip = entry as usize + LITERAL_SIZE;
        let symbol = table.at(ip).ok_or_else(|| site_table_error("a site is not a function start"))?;
        sites.push(Site::new(ip, symbol.name));
    }
    if !arch::ftrace::PREPARE.is_empty() {
        let mut patcher = TextPatcher::new();
        for site in &mut sites {
            sites::prepare(&mut patcher, site);
        }
    }
    let cycles = arch::timer::cycles().wrapping_sub(start);
    let boot_update_ns = (u128::from(cycles) * 1_000_000_000 / u128::from(arch::timer::cycles_per_second().max(1))) as u64;
    *REGISTRY.lock() =
        Some(Registry { sites, registered: Vec::new(), enabled: true, stats: UpdateStats::default(), boot_update_ns });
    Ok(InitInfo { sites: count, symbols: table.len() })
}

/// Runs `f` on the registry, from normal context only, with interrupts on:
/// a patch batch waits for every CPU to answer (and answers them), which a
/// caller with interrupts masked would leave half done.
fn with_registry<R>(f: impl FnOnce(&mut Registry) -> Result<R, FtraceError>) -> Result<R, FtraceError> {
    if context::current() != Context::Normal || recursion::in_callback() || !arch::cpu::interrupts_enabled() {
        return Err(FtraceError::WrongContext);
    }
    let result = {
        let mut guard = REGISTRY.lock();
        let registry = guard.as_mut().ok_or(FtraceError::Unavailable("not initialised"))?;
        f(registry)
    };
    // Normal context, outside callbacks: a good moment to free what earlier
    // changes retired.
    deferred::reclaim();
    result
}

impl Registry {
    fn position(&self, ops: &FtraceOps) -> Option<usize> {
        self.registered.iter().position(|r| core::ptr::eq(r.ops, ops))
    }

    /// Plans the candidates (see [`crate::patch::plan`]): what each must become,
    /// with the new per-site lists built (never on the traced path).
    fn plan(&self, candidates: &Bitmap) -> Result<Vec<Desired>, FtraceError> {
        let ops: Vec<PlanOps> = self
            .registered
            .iter()
            .map(|r| PlanOps {
                effective: &r.effective,
                regs: r.ops.wants_regs(),
                ipmodify: r.ops.flags().contains(OpsFlags::IPMODIFY),
            })
            .collect();
        let list_is = |index: usize, wanted: &[usize]| {
            self.sites[index].list.as_ref().is_some_and(|list| {
                list.ops.len() == wanted.len()
                    && list.ops.iter().zip(wanted).all(|(a, &b)| core::ptr::eq(*a, self.registered[b].ops))
            })
        };
        let failed = |index: usize| self.sites[index].failed;
        let sites = plan::plan(candidates, &ops, self.enabled, failed, list_is)
            .map_err(|conflict| FtraceError::IpModifyConflict(self.sites[conflict.index].name))?;
        Ok(sites
            .into_iter()
            .map(|site| Desired {
                index: site.index,
                call: site.call.map(|call| match call {
                    Call::Args => Trampoline::Args,
                    Call::Regs => Trampoline::Regs,
                }),
                ops_count: site.count as u32,
                ipmodify: site.ipmodify,
                list: site.new_list.map(|ops| SiteList::new(ops.iter().map(|&i| self.registered[i].ops).collect())),
                single: site.single.map(|i| self.registered[i].ops),
            })
            .collect())
    }

    /// Plans, validates, then patches the candidates whose state changes.
    fn update(&mut self, candidates: &Bitmap) -> Result<(), FtraceError> {
        let plan = self.plan(candidates)?;
        self.stats.updates += 1;
        let mut retired: Vec<Box<SiteList>> = Vec::new();
        let (switched, refused) = self.switch_to_full_registers_first(&plan);
        {
            let mut patcher: Option<TextPatcher> = None;
            for desired in plan {
                let site = &mut self.sites[desired.index];
                if refused.contains(&desired.index) {
                    self.stats.sites_refused += 1;
                    retired.extend(desired.list);
                    continue;
                }
                let keep_list = desired.ops_count > 1 && desired.list.is_none();
                let literal: *const SiteCall = match (&desired.list, desired.single) {
                    (Some(list), _) => list.site_call(),
                    (None, Some(ops)) => ops.site_call(),
                    (None, None) if keep_list => site.list.as_ref().expect("kept list").site_call(),
                    (None, None) => &NOP_CALL,
                };
                let literal = literal as u64;
                let unchanged = site.call == desired.call && (desired.call.is_none() || site.literal == literal);
                if unchanged && switched.contains(&desired.index) {
                    self.stats.sites_patched += 1;
                }
                if !unchanged {
                    let patcher = patcher.get_or_insert_with(TextPatcher::new);
                    if sites::set_state(patcher, site, desired.call, literal) {
                        self.stats.sites_patched += 1;
                    } else {
                        self.stats.sites_refused += 1;
                        // Its literal named the new list for a moment: the
                        // list goes when the batch's lists do.
                        retired.extend(desired.list);
                        continue;
                    }
                }
                site.ops_count = desired.ops_count;
                site.touched |= desired.ops_count > 0;
                site.ipmodify = desired.ipmodify;
                if !keep_list {
                    if let Some(old) = core::mem::replace(&mut site.list, desired.list) {
                        retired.push(old);
                    }
                }
            }
        }
        // The batch is closed: no site points at a retired list any more, but
        // a trampoline may still be walking one.
        for list in retired {
            SiteList::retire(list);
        }
        Ok(())
    }

    /// The first batch of an update: every site going from the sparse
    /// trampoline to the full one changes its call alone, keeping the
    /// literal it has. Its new literal may lead to an ops that wants every
    /// register, and in one batch it would be in place (data goes first)
    /// while another CPU still runs the old call to the sparse trampoline,
    /// until the batch's last synchronisation: that ops would get a sparse
    /// save. (Linux skips such an ops for that moment, `ftrace_ops_test`;
    /// here it is never reached without its registers.) The literal follows
    /// in the update's main batch. The other way, full to sparse, needs
    /// nothing: the new literal, in place first, leads only to ops that take
    /// a sparse save, which a full one holds. Answers the sites switched,
    /// and those refused (out of service, left for the main batch to skip).
    fn switch_to_full_registers_first(&mut self, plan: &[Desired]) -> (Vec<usize>, Vec<usize>) {
        let (mut switched, mut refused) = (Vec::new(), Vec::new());
        let mut patcher: Option<TextPatcher> = None;
        for desired in plan {
            let site = &mut self.sites[desired.index];
            if site.call != Some(Trampoline::Args) || desired.call != Some(Trampoline::Regs) {
                continue;
            }
            let literal = site.literal;
            if sites::set_state(patcher.get_or_insert_with(TextPatcher::new), site, desired.call, literal) {
                switched.push(desired.index);
            } else {
                refused.push(desired.index);
            }
        }
        // Dropping the patcher applies the batch (and synchronises every
        // CPU) before the main batch opens.
        drop(patcher);
        (switched, refused)
    }

    fn effective(&self, ops: &FtraceOps) -> Bitmap {
        ops.filters.lock().effective(self.sites.len())
    }

    /// Replaces a registered ops's effective set and updates; restores it if
    /// the update is refused.
    fn refilter(&mut self, ops: &FtraceOps, effective: Bitmap) -> Result<(), FtraceError> {
        let Some(position) = self.position(ops) else { return Ok(()) };
        let old = core::mem::replace(&mut self.registered[position].effective, effective.clone());
        let mut candidates = old.clone();
        candidates.union_with(&effective);
        self.update(&candidates).inspect_err(|_| self.registered[position].effective = old)
    }
}

/// Starts calling `ops` at every function its filters select.
pub fn register(ops: &'static FtraceOps) -> Result<(), FtraceError> {
    with_registry(|registry| {
        if registry.position(ops).is_some() {
            return Err(FtraceError::AlreadyRegistered);
        }
        if ops.flags().contains(OpsFlags::PERMANENT) && !registry.enabled {
            return Err(FtraceError::TracingDisabled);
        }
        let effective = registry.effective(ops);
        registry.registered.push(Registered { ops, effective: effective.clone() });
        registry.update(&effective).inspect_err(|_| {
            registry.registered.pop();
        })
    })
}

/// Stops calling `ops`. When this returns, no site leads to it any more.
pub fn unregister(ops: &'static FtraceOps) -> Result<(), FtraceError> {
    with_registry(|registry| {
        let position = registry.position(ops).ok_or(FtraceError::NotRegistered)?;
        let removed = registry.registered.remove(position);
        let effective = removed.effective.clone();
        // A refused update changed no site: the ops stays registered, as
        // its sites still lead to it.
        registry.update(&effective).inspect_err(|_| registry.registered.insert(position, removed))
    })
}

/// Whether `ops` is registered.
pub fn is_registered(ops: &FtraceOps) -> bool {
    REGISTRY.lock().as_ref().is_some_and(|registry| registry.position(ops).is_some())
}

/// Which of an ops's two filters a change applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterKind {
    /// `set_ftrace_filter`: only these functions (empty: all).
    Filter,
    /// `set_ftrace_notrace`: never these functions.
    Notrace,
}

/// Changes one of `ops`'s filters with globs (see [`crate::symbols::glob`]); applies
/// live if it is registered. On error nothing changes.
pub fn set_filter(ops: &FtraceOps, kind: FilterKind, text: &str, mode: FilterMode) -> Result<(), FtraceError> {
    with_registry(|registry| {
        let count = registry.sites.len();
        let sites = &registry.sites;
        let current = {
            let filters = ops.filters.lock();
            match kind {
                FilterKind::Filter => filters.filter.clone(),
                FilterKind::Notrace => filters.notrace.clone(),
            }
        };
        let current = if current.len() == count { current } else { Bitmap::new(count) };
        let new = apply_filter(&current, text, mode, count, |i| sites[i].name)?;
        commit_filter(registry, ops, kind, new)
    })
}

/// Changes one of `ops`'s filters by function address. Every address must be
/// a traceable function's; on error nothing changes.
pub fn set_filter_ips(ops: &FtraceOps, kind: FilterKind, ips: &[usize], mode: FilterMode) -> Result<(), FtraceError> {
    with_registry(|registry| {
        let count = registry.sites.len();
        let mut new = match mode {
            FilterMode::Replace => Bitmap::new(count),
            FilterMode::Append => {
                let filters = ops.filters.lock();
                let current = match kind {
                    FilterKind::Filter => &filters.filter,
                    FilterKind::Notrace => &filters.notrace,
                };
                if current.len() == count {
                    current.clone()
                } else {
                    Bitmap::new(count)
                }
            }
        };
        for &ip in ips {
            let index = registry.sites.binary_search_by_key(&ip, |r| r.ip).map_err(|_| FtraceError::NotTraceable(ip))?;
            new.set(index);
        }
        commit_filter(registry, ops, kind, new)
    })
}

fn commit_filter(registry: &mut Registry, ops: &FtraceOps, kind: FilterKind, new: Bitmap) -> Result<(), FtraceError> {
    let old = {
        let mut filters = ops.filters.lock();
        match kind {
            FilterKind::Filter => core::mem::replace(&mut filters.filter, new),
            FilterKind::Notrace => core::mem::replace(&mut filters.notrace, new),
        }
    };
    let effective = registry.effective(ops);
    registry.refilter(ops, effective).inspect_err(|_| {
        let mut filters = ops.filters.lock();
        match kind {
            FilterKind::Filter => filters.filter = old,
            FilterKind::Notrace => filters.notrace = old,
        }
    })
}

/// Makes `to`'s filters the same as `from`'s (both filter and notrace), live.
pub fn copy_filters(from: &FtraceOps, to: &FtraceOps) -> Result<(), FtraceError> {
    with_registry(|registry| {
        let (filter, notrace) = {
            let filters = from.filters.lock();
            (filters.filter.clone(), filters.notrace.clone())
        };
        let old = core::mem::replace(&mut *to.filters.lock(), crate::ops::Filters { filter, notrace });
        let effective = registry.effective(to);
        registry.refilter(to, effective).inspect_err(|_| *to.filters.lock() = old)
    })
}

/// The addresses of the traceable functions `text` selects, applied to
/// `current` (sorted addresses) as a filter text is: `GLOB` adds, `!GLOB`
/// removes, a word matching nothing is an error. Returns sorted addresses.
pub fn match_functions(current: &[usize], text: &str, mode: FilterMode) -> Result<Vec<usize>, FtraceError> {
    let guard = REGISTRY.lock();
    let registry = guard.as_ref().ok_or(FtraceError::Unavailable("not initialised"))?;
    let sites = &registry.sites;
    let mut set = Bitmap::new(sites.len());
    for ip in current {
        if let Ok(index) = sites.binary_search_by_key(ip, |r| r.ip) {
            set.set(index);
        }
    }
    let set = apply_filter(&set, text, mode, sites.len(), |i| sites[i].name)?;
    Ok(set.iter_ones().map(|i| sites[i].ip).collect())
}

/// The function addresses a filter of `ops` holds, sorted (empty for an
/// empty filter).
pub fn filter_ips(ops: &FtraceOps, kind: FilterKind) -> Vec<usize> {
    filter_sites(ops, kind, |site| site.ip)
}

/// The names a filter of `ops` holds (empty for an empty filter).
pub fn filter_names(ops: &FtraceOps, kind: FilterKind) -> Vec<&'static str> {
    filter_sites(ops, kind, |site| site.name)
}

/// `what` of each site a filter of `ops` holds, in address order.
fn filter_sites<T>(ops: &FtraceOps, kind: FilterKind, what: impl Fn(&Site) -> T) -> Vec<T> {
    let guard = REGISTRY.lock();
    let Some(registry) = guard.as_ref() else { return Vec::new() };
    let filters = ops.filters.lock();
    let set = match kind {
        FilterKind::Filter => &filters.filter,
        FilterKind::Notrace => &filters.notrace,
    };
    set.iter_ones().filter_map(|i| registry.sites.get(i).map(&what)).collect()
}

/// Turns all function tracing on or off (`ftrace_enabled`), keeping every
/// registration.
pub fn set_enabled(enabled: bool) -> Result<(), FtraceError> {
    with_registry(|registry| {
        if registry.enabled == enabled {
            return Ok(());
        }
        if !enabled && registry.registered.iter().any(|r| r.ops.flags().contains(OpsFlags::PERMANENT)) {
            return Err(FtraceError::PermanentOpsRegistered);
        }
        registry.enabled = enabled;
        let all = Bitmap::full(registry.sites.len());
        registry.update(&all).inspect_err(|_| registry.enabled = !enabled)
    })
}

/// Whether function tracing is on (`ftrace_enabled`).
pub fn is_enabled() -> bool {
    REGISTRY.lock().as_ref().is_some_and(|registry| registry.enabled)
}

/// What `dyn_ftrace_total_info` shows: the site table's size and how long
/// building it took at boot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TotalInfo {
    /// Patchable sites (Linux's `dyn_ftrace` records).
    pub sites: usize,
    /// The 4 KiB pages the site table takes.
    pub pages: usize,
    /// The allocations it takes: one table (Linux counts its page groups).
    pub groups: usize,
    /// How long building the table took at boot.
    pub boot_update_ns: u64,
}

/// The site table's size and boot time (`None` before `init`).
pub fn total_info() -> Option<TotalInfo> {
    let registry = REGISTRY.lock();
    let registry = registry.as_ref()?;
    let bytes = registry.sites.capacity() * core::mem::size_of::<Site>();
    Some(TotalInfo {
        sites: registry.sites.len(),
        pages: bytes.div_ceil(4096),
        groups: 1,
        boot_update_ns: registry.boot_update_ns,
    })
}

/// The update counters.
pub fn update_stats() -> UpdateStats {
    REGISTRY.lock().as_ref().map(|registry| registry.stats).unwrap_or_default()
}

/// A site as `enabled_functions` and tests see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SiteInfo {
    pub ip: usize,
    pub name: &'static str,
    pub ops_count: u32,
    pub trampoline: Option<Trampoline>,
    pub ipmodify: bool,
    pub failed: bool,
    /// Whether an ops ever traced it since boot.
    pub touched: bool,
    /// Whether the literal names an ops or a per-site list (rather than
    /// the empty call, or nothing yet).
    pub literal_names_ops: bool,
}

impl SiteInfo {
    fn of(site: &Site) -> SiteInfo {
        SiteInfo {
            ip: site.ip,
            name: site.name,
            ops_count: site.ops_count,
            trampoline: site.call,
            ipmodify: site.ipmodify,
            failed: site.failed,
            touched: site.touched,
            literal_names_ops: site.literal_names_ops(),
        }
    }
}

/// The site of the function at `ip`.
pub fn site(ip: usize) -> Option<SiteInfo> {
    let guard = REGISTRY.lock();
    let registry = guard.as_ref()?;
    let index = registry.sites.binary_search_by_key(&ip, |r| r.ip).ok()?;
    Some(SiteInfo::of(&registry.sites[index]))
}

/// Calls `f` with every site, in address order.
pub fn for_each_site(mut f: impl FnMut(&SiteInfo)) {
    let guard = REGISTRY.lock();
    if let Some(registry) = guard.as_ref() {
        for site in &registry.sites {
            f(&SiteInfo::of(site));
        }
    }
}

/// Puts an out-of-service site back, if its bytes are the disabled state
/// again (the call slot holds the NOP). For tests that corrupt a site on
/// purpose and repair it.
#[cfg(feature = "test-hooks")]
pub fn return_to_service(ip: usize) -> bool {
    let mut guard = REGISTRY.lock();
    let Some(registry) = guard.as_mut() else { return false };
    let Ok(index) = registry.sites.binary_search_by_key(&ip, |r| r.ip) else { return false };
    let site = &mut registry.sites[index];
    let mut slot = [0u8; arch::ftrace::INSN_LEN];
    let intact = arch::text::read(ip + arch::ftrace::CALL_OFFSET, &mut slot).is_ok() && slot == arch::ftrace::NOP;
    if intact && site.call.is_none() {
        site.failed = false;
    }
    !site.failed
}
