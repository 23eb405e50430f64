//! Histogram triggers: `echo 'hist:keys=prev_pid' > events/GRP/EVENT/trigger`
//! counts an event's hits per value of its key fields (and sums other
//! fields), and `cat events/GRP/EVENT/hist` prints the table, as Linux's
//! `hist` triggers do.
//!
//! A line is `hist:keys=K[,K...][:vals=V[,V...]][:sort=S[,S]][:size=N]`
//! `[:pause|:cont|:clear] [if FILTER]`: up to three keys, each a field with
//! an optional modifier (`.hex`, `.sym`, `.sym-offset`, `.execname` on
//! `common_pid`, `.log2`, `.buckets=SIZE`); up to three numeric values to
//! sum (`hitcount`, every entry's count, is always there), shown plain,
//! `.hex`, `.percent` (a share of the column's total) or `.graph` (a bar,
//! full for the column's largest); up to two sort keys, each
//! `hitcount` or a key or value field, `.descending` or (the default)
//! `.ascending`; a table of `size` entries (128 to 131072, rounded up to a
//! power of two; 2048 by default). Variables (`NAME=EXPR`), reads of other
//! histograms' (`$NAME`) and `onmatch()` actions are Linux's inter-event
//! parts: see [`expr`]; an entry keeps its variables beside
//! its sums.
//!
//! In files: [`spec`] parses a line into a [`HistSpec`];
//! [`map`] is the lock-free table the hit path fills; this module is the
//! trigger ([`Histogram`]): the hit, the variables and actions, and the
//! printed table; [`expr`] the inter-event parts.
//!
//! Failure modes: a bad line is refused whole with the reason; a table the
//! heap cannot hold is refused. `clear` empties the table while the
//! trigger is paused and after every CPU has left its hit path (the caller
//! waits for that: [`Histogram::clear`]).

pub mod expr;
pub mod map;
pub mod spec;

use crate::events::hist::map::HistMap;
use crate::events::hist::spec::{HistError, HistField, HistSpec, Modifier, SortBy};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt::{self, Write};
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use alloc::sync::Arc;

use crate::events::filter::{FieldKind, FieldValue, Source};
use crate::events::hist::expr::{
    Handler, HitValues, SynthCall, Track, TrackAction, Vars, MAX_PARAMS, MAX_REFS, MAX_VARS, SAVED_STRING_WORDS,
};
use ftrace::symbols::table::Symbol;

/// The most key fields, as in Linux.
pub const MAX_KEYS: usize = 3;
/// The most value fields besides `hitcount`.
pub const MAX_VALS: usize = 3;
/// The entries of a table by default, and the range `size=` takes.
pub const DEFAULT_SIZE: usize = 2048;
pub const MIN_SIZE: usize = 128;
pub const MAX_SIZE: usize = 131_072;
/// A string key keeps this many bytes: a `:symstr`
/// (`function+0xOFF/0xSIZE`) fits whole, so two strings that differ late
/// are two keys. (Linux keeps up to `MAX_FILTER_STR_VAL`, 256; half that
/// keeps a default table of one string key near half a MiB.)
const STRING_KEY_BYTES: usize = 128;
const STRING_KEY_WORDS: usize = STRING_KEY_BYTES / 8;
/// The most return addresses a `common_stacktrace` key keeps (Linux's
/// `HIST_STACKTRACE_DEPTH`): two chains that differ deeper are one key.
pub const STACK_KEY_WORDS: usize = 16;
/// The most words a key takes: every key a string or a chain.
const MAX_KEY_WORDS: usize = MAX_KEYS * if STRING_KEY_WORDS > STACK_KEY_WORDS { STRING_KEY_WORDS } else { STACK_KEY_WORDS };
/// How long a hit waits for a slot another CPU is filling in.
const CLAIM_SPINS: usize = 10_000;
/// The most heap every histogram table together may take: a table is
/// refused past it, so tables cannot starve the heap the rest of the
/// kernel (and `cat hist` itself) needs.
pub const TABLES_BUDGET: usize = 16 << 20;

/// Heap the live tables take.
static TABLES_BYTES: AtomicUsize = AtomicUsize::new(0);

/// A histogram trigger's state: its spec, its table, whether it is paused,
/// and (once [`resolve`](Histogram::resolve)d) where its `$NAME` reads and
/// its actions go.
pub struct Histogram {
    spec: HistSpec,
    map: HistMap,
    paused: AtomicBool,
    /// For each of `spec.vars.refs`: the histogram and the variable.
    reads: Vec<(Arc<Histogram>, usize)>,
    /// For each variable: whether it holds `common_timestamp.usecs`'s
    /// units, worked out once its reads are known (so a chain of
    /// histograms reading each other's variables is never walked again).
    usecs_vars: Vec<bool>,
    /// For each of `spec.vars.calls()`: the synthetic event it records.
    targets: Vec<Arc<dyn SynthTarget>>,
    /// The resolved histograms that read its variables (Linux refuses to
    /// remove it while there are some).
    readers: AtomicUsize,
    /// Its trigger was removed: no new trigger may read its variables.
    detached: AtomicBool,
    /// Whether a hit reads the clock (worked out once, not at each hit).
    timestamps: bool,
    /// Where a `.snapshot()` action takes its snapshot (resolved with the
    /// rest), and the last one it took.
    snapshot: Option<Arc<dyn SnapshotTarget>>,
    taken: TakenRecord,
}

/// What the last `.snapshot()` was taken for: the value, and the key of
/// the entry whose hit set it (`None` before the first).
#[derive(Clone, Copy, Debug)]
struct Taken {
    value: u64,
    key: [u64; MAX_KEY_WORDS],
}

/// The last [`Taken`], written by hits and read by `cat hist` without
/// either waiting on the other: hits run with interrupts masked (an
/// event's triggers fire so) and write one at a time under `writer`; a
/// reader never holds a lock a hit could wait for (an interrupt on its CPU
/// would spin forever), it rereads if `seq` says a write overlapped (odd
/// while one is under way, as a seqlock).
struct TakenRecord {
    writer: spin::Mutex<()>,
    seq: AtomicU64,
    /// Whether a snapshot was taken yet.
    set: AtomicBool,
    value: AtomicU64,
    key: [AtomicU64; MAX_KEY_WORDS],
}

impl TakenRecord {
    fn new() -> TakenRecord {
        TakenRecord {
            writer: spin::Mutex::new(()),
            seq: AtomicU64::new(0),
            set: AtomicBool::new(false),
            value: AtomicU64::new(0),
            key: [const { AtomicU64::new(0) }; MAX_KEY_WORDS],
        }
    }

    /// The value the next snapshot must pass: the last one's (0 first, as
    /// Linux tracks from 0). For a writer holding `writer`.
    fn last_value(&self) -> u64 {
        self.value.load(Ordering::Relaxed)
    }

    /// Records a snapshot taken (the caller holds `writer`).
    fn record(&self, value: u64, key: &[AtomicU64]) {
        self.seq.fetch_add(1, Ordering::Relaxed);
        core::sync::atomic::fence(Ordering::Release);
        self.value.store(value, Ordering::Relaxed);
        for (word, stored) in self.key.iter().zip(key) {
            word.store(stored.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        self.set.store(true, Ordering::Relaxed);
        self.seq.fetch_add(1, Ordering::Release);
    }

    /// A consistent copy, or `None` before the first snapshot.
    fn read(&self) -> Option<Taken> {
        loop {
            let before = self.seq.load(Ordering::Acquire);
            if before % 2 == 1 {
                core::hint::spin_loop();
                continue;
            }
            let set = self.set.load(Ordering::Relaxed);
            let taken = Taken {
                value: self.value.load(Ordering::Relaxed),
                key: core::array::from_fn(|n| self.key[n].load(Ordering::Relaxed)),
            };
            core::sync::atomic::fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == before {
                return set.then_some(taken);
            }
        }
    }
}

/// Where a `.snapshot()` action takes its snapshot: a trace array's
/// snapshot buffer, allocated and held for it while the action exists.
pub trait SnapshotTarget: Send + Sync {
    /// Takes the snapshot (from a hit path: no allocation, no waiting);
    /// answers whether it was taken (another swap under way loses it).
    fn take(&self) -> bool;
    /// The action went (its trigger was removed, or never added): the
    /// hold ends. Called once or more; only the first counts.
    fn release(&self);
}

/// What an `onmatch` action records: a synthetic event, given its fields'
/// values in order (numbers and strings, as their types say).
pub trait SynthTarget: Send + Sync {
    /// Records the event (from a hit path: no allocation, no lock).
    fn fire(&self, values: &[FieldValue]);
    /// An action that records it was added (it is in use until the
    /// matching [`release`](Self::release)).
    fn hold(&self) {}
    /// That action's histogram went.
    fn release(&self) {}
}

impl Drop for Histogram {
    fn drop(&mut self) {
        for (hist, _) in &self.reads {
            hist.readers.fetch_sub(1, Ordering::Relaxed);
        }
        for target in &self.targets {
            target.release();
        }
        if let Some(snapshot) = &self.snapshot {
            snapshot.release();
        }
    }
}

/// `value` as a share of `total`, in hundredths of a percent, as Linux's
/// `__get_percentage` works it out; `None` (Linux's `[ERROR]`) for a value
/// of a zero total.
fn hundredths_of_percent(value: u64, total: u64) -> Option<u64> {
    if total == 0 {
        return (value == 0).then_some(0);
    }
    if value < u64::MAX / 10_000 {
        return Some(value * 10_000 / total);
    }
    let total = total / 10_000;
    (total != 0).then(|| value / total)
}

/// A `.graph` bar: `#` for the share of `most` the value is, 20 for all of
/// it, padded to 20 with spaces (Linux's `__fill_bar_str`).
struct Bar(u64, u64);

impl fmt::Display for Bar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const WIDTH: u64 = 20;
        let Some(pc) = hundredths_of_percent(self.0, self.1) else { return write!(f, "{:>20}", "[ERROR]") };
        let hashes = (pc * WIDTH / 10_000).min(WIDTH) as usize;
        write!(f, "{:#<hashes$}{:<rest$}", "", "", rest = WIDTH as usize - hashes)
    }
}

/// `log2` keys: the power of two at or above `value` (0 and 1 are 2^0).
fn log2_bucket(value: u64) -> u64 {
    value.max(1).checked_next_power_of_two().map_or(64, |power| u64::from(power.trailing_zeros()))
}

impl Histogram {
    /// A histogram for `spec`, its table allocated now (a hit cannot
    /// allocate); paused from the start if the line said `pause`.
    pub fn try_new(spec: HistSpec) -> Result<Histogram, HistError> {
        let map = HistMap::try_new(spec.size, spec.key_words(), 1 + spec.vals.len(), spec.vars.entry_words())
            .ok_or(HistError::NoMemory)?;
        let paused = AtomicBool::new(spec.controls.pause);
        let (readers, detached) = (AtomicUsize::new(0), AtomicBool::new(false));
        let timestamps = spec.vars.uses_timestamp();
        let usecs_vars = spec.vars.defs.iter().map(|def| def.expr.usecs(&|_| false)).collect();
        Ok(Histogram {
            spec,
            map,
            paused,
            reads: Vec::new(),
            usecs_vars,
            targets: Vec::new(),
            readers,
            detached,
            timestamps,
            snapshot: None,
            taken: TakenRecord::new(),
        })
    }

    pub fn spec(&self) -> &HistSpec {
        &self.spec
    }

    /// Whether its keys have the shape of `other`'s (what reading a
    /// variable of `other` by this one's key needs).
    pub fn keys_match(&self, other: &Histogram) -> bool {
        let shape =
            |spec: &HistSpec| spec.keys.iter().map(|key| (key.kind == FieldKind::String, key.key_words())).collect::<Vec<_>>();
        shape(&self.spec) == shape(&other.spec)
    }

    /// Says where its reads and actions go: `find(name)` gives the
    /// histogram defining variable `name`, and the variable's index there
    /// (what the caller's search found); `synth(name)` gives the synthetic
    /// event `name` and its fields' kinds (whether each is a string);
    /// `snapshot()`, asked only if a `.snapshot()` action needs it, the
    /// snapshot buffer, held for it. Refused, changing nothing, if one is
    /// missing or does not fit.
    pub fn resolve(
        &mut self,
        find: impl Fn(&str) -> Option<(Arc<Histogram>, usize)>,
        synth: impl Fn(&str) -> Option<(Arc<dyn SynthTarget>, Vec<bool>)>,
        snapshot: impl FnOnce() -> Result<Arc<dyn SnapshotTarget>, HistError>,
    ) -> Result<(), HistError> {
        let mut reads = Vec::new();
        for read in &self.spec.vars.refs {
            let (hist, var) = find(&read.name).ok_or_else(|| HistError::NoSuchVar(read.name.clone()))?;
            if !self.keys_match(&hist) {
                return Err(HistError::KeyMismatch(read.name.clone()));
            }
            reads.push((hist, var));
        }
        // Linux's `check_expr_operands`: `$NAME`s carry the units of what
        // they were set from.
        let var_usecs = |read: usize| reads.get(read).is_some_and(|(hist, var): &(Arc<Histogram>, usize)| hist.var_usecs(*var));
        let exprs = self.spec.vars.defs.iter().map(|def| &def.expr);
        for expr in exprs.chain(self.spec.vals.iter().filter_map(|val| val.expr.as_ref())) {
            expr.check_units(Some(&var_usecs))?;
        }
        let mut targets = Vec::new();
        for action in self.spec.vars.calls() {
            let (target, strings) = synth(&action.synth).ok_or_else(|| HistError::NoSuchSynth(action.synth.clone()))?;
            if strings.len() != action.params.len() {
                return Err(HistError::ParamMismatch(format!(
                    "'{}' has {} fields, the action gives {}",
                    action.synth,
                    strings.len(),
                    action.params.len()
                )));
            }
            if let Some((param, _)) = action.params.iter().zip(&strings).find(|(param, &string)| param.is_string() != string) {
                return Err(HistError::ParamMismatch(format!(
                    "parameter '{param}' of '{}' is not of its field's kind (a string for a string)",
                    action.synth
                )));
            }
            targets.push(target);
        }
        // Last: nothing is refused after the hold (the drop of the
        // histogram ends it).
        if self.spec.vars.tracks.iter().any(Track::is_snapshot) {
            self.snapshot = Some(snapshot()?);
        }
        // Held from now on, until this histogram goes (see `Drop`).
        for (hist, _) in &reads {
            hist.readers.fetch_add(1, Ordering::Relaxed);
        }
        for target in &targets {
            target.hold();
        }
        self.usecs_vars = self.spec.vars.defs.iter().map(|def| def.expr.usecs(&var_usecs)).collect();
        self.reads = reads;
        self.targets = targets;
        Ok(())
    }

    /// Whether its variable `var` holds `common_timestamp.usecs`'s units
    /// (what its expression's first operand holds, as Linux carries them).
    pub fn var_usecs(&self, var: usize) -> bool {
        self.usecs_vars.get(var).copied().unwrap_or(false)
    }

    /// Whether another trigger's histogram reads its variables.
    pub fn is_read(&self) -> bool {
        self.readers.load(Ordering::Relaxed) > 0
    }

    /// Its trigger was removed: [`is_detached`](Self::is_detached) from now on.
    pub fn detach(&self) {
        if let Some(snapshot) = &self.snapshot {
            snapshot.release();
        }
        self.detached.store(true, Ordering::Relaxed);
    }

    /// Whether its trigger was removed (its variables are no one's to read).
    pub fn is_detached(&self) -> bool {
        self.detached.load(Ordering::Relaxed)
    }

    /// The index of its variable `name`.
    pub fn var_index(&self, name: &str) -> Option<usize> {
        self.spec.vars.own(name)
    }

    /// Counts one hit of the event whose fields `value` gives, at time
    /// `now()` (read only if a variable needs it), sets its variables and
    /// runs its actions: its hit path; nothing while paused, nor when a
    /// variable it reads has no value for this key. `stack` fills the
    /// words it is given with the return addresses that led to the event,
    /// innermost first (zeros after the last), for a `common_stacktrace`
    /// key.
    pub fn hit<'a>(&self, value: &dyn Fn(usize) -> FieldValue<'a>, now: &dyn Fn() -> u64, stack: &dyn Fn(&mut [u64])) {
        // Acquire: after a `clear`, the emptied table is what this hit sees.
        if self.paused.load(Ordering::Acquire) {
            return;
        }
        let mut key = [0u64; MAX_KEY_WORDS];
        let mut at = 0;
        for field in &self.spec.keys {
            if field.source == Source::Stack {
                stack(&mut key[at..at + STACK_KEY_WORDS]);
                at += STACK_KEY_WORDS;
                continue;
            }
            if let Some(expr) = &field.expr {
                // No `$NAME` in a key: nothing read yet.
                let value = expr.value(&HitValues { field: value, now, refs: &[] });
                key[at] = number(FieldValue::Unsigned(value), field.modifier);
                at += 1;
                continue;
            }
            match field.source.read(value) {
                FieldValue::Str(bytes) => {
                    let bytes = bytes.split(|&b| b == 0).next().unwrap_or(&[]);
                    for (n, chunk) in bytes.chunks(8).take(STRING_KEY_WORDS).enumerate() {
                        let mut word = [0u8; 8];
                        word[..chunk.len()].copy_from_slice(chunk);
                        key[at + n] = u64::from_le_bytes(word);
                    }
                }
                other => key[at] = number(other, field.modifier),
            }
            at += field.key_words();
        }
        let key = &key[..at];
        // Other histograms' variables first: a hit without them is not
        // counted (Linux's `resolve_var_refs`).
        let mut reads = [0u64; MAX_REFS];
        for ((slot, (hist, var)), read) in reads.iter_mut().zip(&self.reads).zip(&self.spec.vars.refs) {
            let found = hist.map.find(key).and_then(|entry| hist.map.read_var(entry, *var, read.once));
            match found {
                Some(found) => *slot = found,
                None => return,
            }
        }
        let mut vals = [0u64; MAX_VALS];
        let reads = &reads[..self.reads.len()];
        for (slot, field) in vals.iter_mut().zip(&self.spec.vals) {
            *slot = match &field.expr {
                _ if field.counts_hits => 1,
                Some(expr) => expr.value(&HitValues { field: value, now, refs: reads }),
                None => number(field.source.read(value), Modifier::Plain),
            };
        }
        let Some(entry) = self.map.insert(key, &vals[..self.spec.vals.len()]) else { return };
        if self.spec.vars.is_empty() {
            return;
        }
        self.set_vars_and_act(entry, value, now, reads);
    }

    /// The rest of a hit of a histogram with variables or actions: sets
    /// the variables of the entry in `slot` and runs the actions.
    fn set_vars_and_act<'a>(&self, slot: usize, value: &dyn Fn(usize) -> FieldValue<'a>, now: &dyn Fn() -> u64, reads: &[u64]) {
        // One clock reading for every expression of the hit.
        let time = self.timestamps.then(now).unwrap_or(0);
        let hit = HitValues { field: value, now: &|| time, refs: reads };
        let mut vars = [0u64; MAX_VARS];
        for (n, (var, def)) in vars.iter_mut().zip(&self.spec.vars.defs).enumerate() {
            *var = def.expr.value(&hit);
            self.map.set_var(slot, n, *var);
        }
        let fire = |call: &SynthCall, target: &Arc<dyn SynthTarget>| {
            let mut params = [FieldValue::Missing; MAX_PARAMS];
            let len = Vars::params(call, &vars, reads, value, &mut params);
            target.fire(&params[..len]);
        };
        // The targets follow `calls()`: the `onmatch` actions', then the
        // tracks'.
        let mut targets = self.targets.iter();
        for (action, target) in self.spec.vars.actions.iter().zip(targets.by_ref()) {
            fire(&action.call, target);
        }
        for track in &self.spec.vars.tracks {
            let target = matches!(track.action, TrackAction::Trace(_)).then(|| targets.next()).flatten();
            if !self.track(slot, track, vars[track.var], value) {
                continue;
            }
            match (&track.action, target) {
                (TrackAction::Snapshot, _) => self.snapshot_if_past(track, vars[track.var], slot),
                (TrackAction::Trace(call), Some(target)) => fire(call, target),
                _ => {}
            }
        }
    }

    /// A `.snapshot()` action whose entry's value changed (`onmax`: grew):
    /// takes the snapshot if the value is past the last snapshot's too
    /// (from 0), and records it and the entry's key, as Linux's conditional
    /// snapshot does. The check, the swap and the record are one step
    /// among hits (a `snapshot` trigger of the same array may still swap
    /// in between, as in Linux).
    fn snapshot_if_past(&self, track: &Track, tracked: u64, slot: usize) {
        let Some(target) = &self.snapshot else { return };
        let _writer = self.taken.writer.lock();
        let last = self.taken.last_value();
        let past = match track.handler {
            Handler::Max => tracked > last,
            Handler::Change => tracked != last,
        };
        if past && target.take() {
            self.taken.record(tracked, self.map.key_of(slot));
        }
    }

    /// `onmax()` / `onchange()` in the entry in `slot`: a new largest (or
    /// changed) `tracked` value is kept, with the fields it saves; answers
    /// whether it was. (Two CPUs hitting one key at once may mix their
    /// saves, as in Linux.)
    fn track<'a>(&self, slot: usize, track: &Track, tracked: u64, value: &dyn Fn(usize) -> FieldValue<'a>) -> bool {
        // Tracked from 0, as Linux's: a first value of 0 is no change.
        let current = self.map.read_var(slot, track.at, false).unwrap_or(0);
        let keep = match track.handler {
            Handler::Max => tracked > current,
            Handler::Change => tracked != current,
        };
        if !keep {
            return false;
        }
        for saved in track.saves() {
            match saved.source.read(value) {
                FieldValue::Str(bytes) => {
                    let bytes = bytes.split(|&b| b == 0).next().unwrap_or(&[]);
                    for n in 0..SAVED_STRING_WORDS {
                        let mut word = [0u8; 8];
                        let chunk = bytes.get(8 * n..).unwrap_or(&[]);
                        let len = chunk.len().min(8);
                        word[..len].copy_from_slice(&chunk[..len]);
                        self.map.set_var(slot, saved.at + n, u64::from_le_bytes(word));
                    }
                }
                other => self.map.set_var(slot, saved.at, number(other, Modifier::Plain)),
            }
        }
        self.map.set_var(slot, track.at, tracked);
        true
    }

    /// `pause` / `cont`.
    pub fn set_paused(&self, paused: bool) {
        self.paused.store(paused, Ordering::Relaxed);
    }

    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Relaxed)
    }

    /// `clear`: empties the table. `wait` must return once no CPU is in
    /// a hit path any more that was in one when it was called (hits run
    /// with interrupts masked); the trigger is paused meanwhile and then as
    /// it was. Its slots are freed before their words are zeroed, with a
    /// wait between: a trigger reading its variables meanwhile finds either
    /// a whole entry or none, never a zeroed key that matches another.
    pub fn clear(&self, wait: impl Fn()) {
        let was = self.paused.swap(true, Ordering::SeqCst);
        wait();
        self.map.free_all();
        wait();
        self.map.zero();
        self.paused.store(was, Ordering::SeqCst);
    }

    /// `cat hist` for this trigger: the header with `line` (its line in
    /// `cat trigger`), the entries sorted, and the totals, as Linux prints
    /// them.
    pub fn write(&self, line: &str, out: &mut dyn Write, names: Namer, comms: Comms) -> fmt::Result {
        write!(out, "# event histogram\n#\n# trigger info: {line}\n#\n\n")?;
        let mut entries = self.map.entries_with_vars();
        entries.sort_by(|a, b| {
            for key in &self.spec.sort {
                let order = match key.by {
                    SortBy::Hitcount => a.1[0].cmp(&b.1[0]),
                    SortBy::Val(n) => a.1[n + 1].cmp(&b.1[n + 1]),
                    SortBy::Key(n) => self.compare_key(n, &a.0, &b.0),
                };
                let order = if key.descending { order.reverse() } else { order };
                if order.is_ne() {
                    return order;
                }
            }
            // Ties in the order of the keys, so the output is the same
            // whatever slots the entries landed in.
            (0..self.spec.keys.len())
                .map(|n| self.compare_key(n, &a.0, &b.0))
                .find(|order| order.is_ne())
                .unwrap_or(core::cmp::Ordering::Equal)
        });
        // Each column's total and most, for `.percent` and `.graph`.
        let mut columns = [(0u64, 0u64); MAX_VALS + 1];
        for (_, sums, _) in &entries {
            for (column, &sum) in columns.iter_mut().zip(sums.iter()) {
                *column = (column.0.saturating_add(sum), column.1.max(sum));
            }
        }
        for (key, sums, vars) in &entries {
            self.write_entry(out, key, sums, &columns, names, comms)?;
            self.write_tracks(out, vars)?;
            writeln!(out)?;
        }
        self.write_snapshot_taken(out, names, comms)?;
        let (hits, drops) = self.map.totals();
        write!(out, "\nTotals:\n    Hits: {hits}\n    Entries: {}\n    Dropped: {drops}\n", entries.len())
    }

    /// Key field `n`'s words within an entry's key.
    fn key_part<'k>(&self, n: usize, key: &'k [u64]) -> &'k [u64] {
        let start: usize = self.spec.keys[..n].iter().map(HistField::key_words).sum();
        &key[start..start + self.spec.keys[n].key_words()]
    }

    fn compare_key(&self, n: usize, a: &[u64], b: &[u64]) -> core::cmp::Ordering {
        let (a, b) = (self.key_part(n, a), self.key_part(n, b));
        if self.spec.keys[n].source == Source::Stack {
            return a.cmp(b);
        }
        match self.spec.keys[n].kind {
            FieldKind::Signed => (a[0] as i64).cmp(&(b[0] as i64)),
            // (No key is an array: refused when the trigger is made.)
            FieldKind::Unsigned | FieldKind::Array => a[0].cmp(&b[0]),
            FieldKind::String => string_of(a).cmp(&string_of(b)),
        }
    }

    fn write_entry(
        &self,
        out: &mut dyn Write,
        key: &[u64],
        sums: &[u64],
        columns: &[(u64, u64)],
        names: Namer,
        comms: Comms,
    ) -> fmt::Result {
        self.write_key(out, key, names, comms)?;
        write!(out, " hitcount: {:>10}", sums[0])?;
        for (field, (&sum, &(total, most))) in self.spec.vals.iter().zip(sums[1..].iter().zip(&columns[1..])) {
            let name = &field.name;
            out.write_str("  ")?;
            match field.modifier {
                Modifier::Percent => match hundredths_of_percent(sum, total) {
                    Some(pc) => write!(out, "{name} (%): {:>3}.{:02}", pc / 100, pc % 100)?,
                    None => write!(out, "{name} (%):[ERROR]")?,
                },
                Modifier::Graph => write!(out, "{name}: {}", Bar(sum, most))?,
                Modifier::Hex => write!(out, "{name}: {sum:>10x}")?,
                _ => write!(out, "{name}: {sum:>10}")?,
            }
        }
        Ok(())
    }

    /// An entry's key, `{ name: value, ... }`, as Linux prints it.
    fn write_key(&self, out: &mut dyn Write, key: &[u64], names: Namer, comms: Comms) -> fmt::Result {
        out.write_str("{ ")?;
        // A chain ends its key's line: the closing brace then starts one.
        let mut multiline = false;
        for (n, field) in self.spec.keys.iter().enumerate() {
            if n > 0 {
                out.write_str(", ")?;
            }
            let words = self.key_part(n, key);
            let value = words[0];
            let name = &field.name;
            if field.source == Source::Stack {
                // Linux's `hist_trigger_stacktrace_print`: a frame a line.
                writeln!(out, "{name}:")?;
                for &address in words.iter().take_while(|&&address| address != 0) {
                    out.write_str("         ")?;
                    crate::output::write_code_address(out, address as usize, names)?;
                    out.write_char('\n')?;
                }
                multiline = true;
                continue;
            }
            match (field.kind, field.modifier) {
                (FieldKind::String, _) => write!(out, "{name}: {:<50}", string_of(words))?,
                (_, Modifier::Hex) => write!(out, "{name}: {value:x}")?,
                (_, Modifier::Sym) => {
                    let symbol = names(value as usize).map_or_else(|| format!("{value:#x}"), |symbol| symbol.name.to_string());
                    write!(out, "{name}: [{value:x}] {symbol:<45}")?
                }
                (_, Modifier::SymOffset) => {
                    let symbol = names(value as usize).map_or_else(
                        || format!("{value:#x}"),
                        |symbol| format!("{}+{:#x}/{:#x}", symbol.name, value as usize - symbol.address, symbol.size),
                    );
                    write!(out, "{name}: [{value:x}] {symbol:<55}")?
                }
                (_, Modifier::Execname) => {
                    let comm = comms(value as i32).unwrap_or_else(|| String::from("<...>"));
                    write!(out, "{name}: {comm:<16}[{value:>10}]")?
                }
                (_, Modifier::Log2) => write!(out, "{name}: ~ 2^{value:<2}")?,
                (_, Modifier::Buckets(size)) => write!(out, "{name}: ~ {value}-{}", value.saturating_add(size - 1))?,
                // Every number as unsigned, as Linux prints it (a signed key
                // sorts as signed all the same).
                _ => write!(out, "{name}: {value:>10}")?,
            }
        }
        if !multiline {
            out.write_char(' ')?;
        }
        out.write_char('}')
    }

    /// After the entries, what the last `.snapshot()` was taken for, as
    /// Linux's `track_data_snapshot_print` says it (nothing before the
    /// first).
    fn write_snapshot_taken(&self, out: &mut dyn Write, names: Namer, comms: Comms) -> fmt::Result {
        let Some(taken) = self.taken.read() else { return Ok(()) };
        let Some(track) = self.spec.vars.tracks.iter().find(|track| track.is_snapshot()) else { return Ok(()) };
        let handler = if track.handler == Handler::Max { "onmax" } else { "onchange" };
        out.write_str("\nSnapshot taken (see tracing/snapshot).  Details:\n")?;
        write!(out, "\ttriggering value {{ {handler}(${}) }}: {:>10}", track.var_name, taken.value)?;
        out.write_str("\ttriggered by event with key: ")?;
        self.write_key(out, &taken.key[..self.spec.key_words()], names, comms)?;
        out.write_char('\n')
    }

    /// An entry's `onmax()`/`onchange()` values and saved fields, as Linux
    /// prints them after its values (`vars`: the entry's words).
    fn write_tracks(&self, out: &mut dyn Write, vars: &[u64]) -> fmt::Result {
        // A `.snapshot()`'s value is said once, after the entries (Linux's
        // `print_actions` skips it).
        for track in self.spec.vars.tracks.iter().filter(|track| !track.is_snapshot()) {
            let label = if track.handler == Handler::Max { "max" } else { "changed" };
            write!(out, "\n\t{label}: {:>10}", vars.get(track.at).copied().unwrap_or(0))?;
            for saved in track.saves() {
                match saved.string {
                    true => {
                        let words = vars.get(saved.at..saved.at + SAVED_STRING_WORDS).unwrap_or(&[]);
                        write!(out, "  {}: {:<32}", saved.name, string_of(words))?
                    }
                    false => write!(out, "  {}: {:>10}", saved.name, vars.get(saved.at).copied().unwrap_or(0))?,
                }
            }
        }
        Ok(())
    }
}

/// A number field's value as a key or value word (`log2` applied).
fn number(value: FieldValue, modifier: Modifier) -> u64 {
    let value = match value {
        FieldValue::Unsigned(value) => value,
        FieldValue::Signed(value) => value as u64,
        FieldValue::Str(_) | FieldValue::Missing => 0,
    };
    match modifier {
        Modifier::Log2 => log2_bucket(value),
        Modifier::Buckets(size) => value - value % size,
        _ => value,
    }
}

/// A string key's text, up to its first NUL.
fn string_of(words: &[u64]) -> String {
    let bytes: Vec<u8> = words.iter().flat_map(|word| word.to_le_bytes()).take_while(|&b| b != 0).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Finds the function an address is inside (`.sym`).
pub type Namer<'a> = &'a dyn Fn(usize) -> Option<Symbol<'static>>;
/// Finds a task's name by pid (`.execname`).
pub type Comms<'a> = &'a dyn Fn(i32) -> Option<String>;

#[cfg(test)]
mod tests;
