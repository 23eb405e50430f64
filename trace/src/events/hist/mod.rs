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
//! parts: see [`crate::events::hist::expr`]; an entry keeps its variables beside
//! its sums.
//!
//! Design. The table ([`HistMap`]) is made whole when the trigger is
//! written and never grows: the event's hit path only inserts into it,
//! without a lock and without allocating, as Linux's `tracing_map` does.
//! It has twice as many slots as entries, probed linearly from the key's
//! hash. A slot goes from free to claimed (a compare-and-swap: one CPU wins
//! it) to ready (its key written, published with release ordering);
//! another CPU that finds it claimed waits for it, a few instructions (the
//! hit path runs with interrupts masked, so the claimer is never
//! interrupted), for at most `CLAIM_SPINS` rounds, and counts a drop if
//! it is still not ready. Sums are atomic adds. A full table counts the
//! hit as dropped (`Dropped:` in the output).
//!
//! Failure modes: a bad line is refused whole with the reason; a table the
//! heap cannot hold is refused. `clear` empties the table while the
//! trigger is paused and after every CPU has left its hit path (the caller
//! waits for that: [`Histogram::clear`]).

pub mod expr;

use alloc::boxed::Box;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt::{self, Write};
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};

use alloc::sync::Arc;

use crate::events::filter::{FieldKind, FieldValue, FilterField, Source};
use crate::events::hist::expr::{
    Expr, ExprError, Handler, HitValues, SynthCall, Track, TrackAction, Vars, MAX_PARAMS, MAX_REFS, MAX_VARS, SAVED_STRING_WORDS,
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

/// How a key or value field is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Modifier {
    Plain,
    Hex,
    Sym,
    SymOffset,
    /// `common_pid.execname`: the task's name.
    Execname,
    /// The power of two at or above the value: `~ 2^N`.
    Log2,
    /// `buckets=SIZE`: the value rounded down to a multiple of SIZE (not
    /// 0), shown as the range `~ FROM-TO`.
    Buckets(u64),
    /// A value (`hitcount` too, as a column of its own) as a share of its
    /// column's total: `(%)`.
    Percent,
    /// A value (`hitcount` too) as a bar of `#`, 20 for its column's most.
    Graph,
}

impl Modifier {
    fn from_name(name: &str) -> Option<Modifier> {
        Some(match name {
            "hex" => Modifier::Hex,
            "sym" => Modifier::Sym,
            "sym-offset" => Modifier::SymOffset,
            "execname" => Modifier::Execname,
            "log2" => Modifier::Log2,
            "percent" => Modifier::Percent,
            "graph" => Modifier::Graph,
            _ => {
                let size = ftrace::number::c_count(name.strip_prefix("buckets=")?)?;
                Modifier::Buckets((size != 0).then_some(size)?)
            }
        })
    }
}

/// The modifier as a field's spec ends with it (`.hex`, `.buckets=10`).
impl fmt::Display for Modifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Modifier::Plain => Ok(()),
            Modifier::Hex => f.write_str(".hex"),
            Modifier::Sym => f.write_str(".sym"),
            Modifier::SymOffset => f.write_str(".sym-offset"),
            Modifier::Execname => f.write_str(".execname"),
            Modifier::Log2 => f.write_str(".log2"),
            Modifier::Buckets(size) => write!(f, ".buckets={size}"),
            Modifier::Percent => f.write_str(".percent"),
            Modifier::Graph => f.write_str(".graph"),
        }
    }
}

/// One key or value: an event field and how it is shown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistField {
    name: String,
    /// What the hit path reads: a field of the event, or a generic one.
    source: Source,
    kind: FieldKind,
    modifier: Modifier,
    /// A value column that counts hits (`hitcount.percent`,
    /// `hitcount.graph`): each hit adds 1, whatever `source` says.
    counts_hits: bool,
    /// A value that is an expression (`vals=a-b`, `vals=$x`), worked out
    /// at each hit; its name is its text.
    expr: Option<Expr>,
}

impl HistField {
    /// Words it takes in a key.
    fn key_words(&self) -> usize {
        match (self.source, self.kind) {
            (Source::Stack, _) => STACK_KEY_WORDS,
            (_, FieldKind::String) => STRING_KEY_WORDS,
            _ => 1,
        }
    }

    fn spec(&self) -> String {
        format!("{}{}", self.name, self.modifier)
    }
}

/// What a sort key sorts by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortBy {
    Hitcount,
    /// Key field N.
    Key(usize),
    /// Value field N (not counting `hitcount`).
    Val(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SortKey {
    pub by: SortBy,
    pub descending: bool,
}

/// What a `pause`, `cont` or `clear` line does to the matching trigger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HistControl {
    Pause,
    Cont,
    Clear,
}

/// The `pause`, `cont` and `clear` words of a line, as Linux's `attrs`
/// keeps them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HistControls {
    pub pause: bool,
    pub cont: bool,
    pub clear: bool,
}

impl HistControls {
    /// What the line does to the same histogram already there: one thing,
    /// `pause` before `cont` before `clear`, as Linux's
    /// `hist_register_trigger` tests them; `None` for a plain line (which
    /// would add it again: refused).
    pub fn on_existing(self) -> Option<HistControl> {
        match self {
            HistControls { pause: true, .. } => Some(HistControl::Pause),
            HistControls { cont: true, .. } => Some(HistControl::Cont),
            HistControls { clear: true, .. } => Some(HistControl::Clear),
            _ => None,
        }
    }

    /// Whether the line only makes sense on a histogram already there
    /// (`cont`, `clear`): Linux refuses it otherwise, even with `pause`.
    pub fn needs_existing(self) -> bool {
        self.cont || self.clear
    }
}

/// A parsed `hist:` line (without its filter).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistSpec {
    keys: Vec<HistField>,
    vals: Vec<HistField>,
    sort: Vec<SortKey>,
    size: usize,
    /// Its variables, the reads of other histograms' and its actions
    /// (`crate::events::hist::expr`).
    vars: Vars,
    /// The trace clock its timestamps need (`clock=`; Linux's default,
    /// `global`): adding it switches its trace array to that clock, as
    /// Linux does.
    clock: String,
    /// The line's `pause`, `cont` and `clear`.
    pub controls: HistControls,
}

/// Why a `hist:` line was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HistError {
    /// No `keys=`.
    NoKeys,
    TooManyKeys,
    TooManyVals,
    TooManySortKeys,
    /// A field the event does not have.
    NoSuchField(String),
    /// A modifier that does not exist or does not suit the field.
    BadModifier(String),
    /// A value that is not a number.
    NotANumber(String),
    /// `common_stacktrace` as a value: a chain is only ever a key.
    KeyOnly(String),
    /// A key expression with a `$NAME` (variables are read by key).
    KeyReadsVariable(String),
    /// An array field, as a key or a value.
    ArrayField(String),
    /// A sort key that is neither `hitcount` nor a key or value.
    BadSortKey(String),
    BadSize(String),
    /// An attribute this kernel does not know (`name=`, actions...).
    Unknown(String),
    /// `keys=`, `vals=` or `sort=` with no field.
    Empty(String),
    /// The heap cannot hold the table, or the tables would take more than
    /// [`TABLES_BUDGET`].
    NoMemory,
    /// The event has this histogram already: the line of the trigger
    /// there, as `cat trigger` shows it without its state.
    Exists(String),
    /// A bad variable, expression or action.
    Expr(ExprError),
    /// `$NAME` names no variable of a histogram of the same trace array
    /// (the `onmatch` event's first), or several.
    NoSuchVar(String),
    /// `$NAME`'s histogram has keys of another shape than this one's.
    KeyMismatch(String),
    /// An action names no synthetic event.
    NoSuchSynth(String),
    /// An action's parameters do not fit its synthetic event's fields.
    ParamMismatch(String),
    /// Another trigger reads this one's variables (remove that first).
    InUse,
    /// Another trigger's `.snapshot()` action holds the trace array's
    /// snapshot (Linux's `EBUSY`).
    SnapshotBusy,
}

impl From<ExprError> for HistError {
    fn from(error: ExprError) -> Self {
        HistError::Expr(error)
    }
}

impl fmt::Display for HistError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HistError::NoKeys => write!(f, "hist: keys=FIELD[,FIELD...] is missing"),
            HistError::TooManyKeys => write!(f, "hist: at most {MAX_KEYS} keys"),
            HistError::TooManyVals => write!(f, "hist: at most {MAX_VALS} values besides hitcount"),
            HistError::TooManySortKeys => write!(f, "hist: at most 2 sort keys"),
            HistError::NoSuchField(name) => write!(f, "hist: the event has no field '{name}'"),
            HistError::BadModifier(text) => write!(
                f,
                "hist: bad modifier in '{text}' (keys: hex, sym, sym-offset, log2, buckets=SIZE on numbers, execname on common_pid; values: hex, percent, graph)"
            ),
            HistError::NotANumber(name) => write!(f, "hist: '{name}' is a string: only numbers are summed"),
            HistError::KeyOnly(name) => write!(f, "hist: '{name}' is a call chain: a key, never a value"),
            HistError::KeyReadsVariable(text) => {
                write!(f, "hist: key '{text}' reads a variable; variables are read by key, so a key cannot")
            }
            HistError::BadSortKey(name) => write!(f, "hist: sort key '{name}' is neither hitcount nor a key or value"),
            HistError::BadSize(text) => write!(f, "hist: size must be {MIN_SIZE} to {MAX_SIZE}, not '{text}'"),
            HistError::Unknown(text) => {
                write!(f, "hist: unknown attribute '{text}' (keys, vals, sort, size, pause, cont, clear)")
            }
            HistError::Empty(name) => write!(f, "hist: '{name}=' names no field"),
            HistError::NoMemory => {
                write!(f, "hist: no memory for the table (every table together may take {} MiB)", TABLES_BUDGET >> 20)
            }
            HistError::ArrayField(name) => write!(f, "hist: field '{name}' is an array: keys and values are single fields"),
            HistError::Exists(line) => write!(f, "hist: the event has this histogram already (remove it with '!{line}')"),
            HistError::Expr(error) => write!(f, "{error}"),
            HistError::NoSuchVar(name) => {
                write!(f, "hist: no histogram of this trace array defines '${name}' (or several do)")
            }
            HistError::KeyMismatch(name) => write!(f, "hist: '${name}' belongs to a histogram whose keys differ from these"),
            HistError::NoSuchSynth(name) => write!(f, "hist: no synthetic event '{name}' (see synthetic_events)"),
            HistError::ParamMismatch(why) => write!(f, "hist: {why}"),
            HistError::InUse => write!(f, "hist: another trigger reads this one's variables; remove it first"),
            HistError::SnapshotBusy => {
                write!(f, "hist: another trigger's .snapshot() action holds this trace array's snapshot; remove it first")
            }
        }
    }
}

/// Parses the attributes of a `hist:` line (what follows `hist:`, up to
/// the filter) against the event's `fields`.
pub fn parse(attrs: &str, fields: &[FilterField]) -> Result<HistSpec, HistError> {
    let mut keys = None;
    let mut vals = Vec::new();
    let mut sort_text = None;
    let mut size = DEFAULT_SIZE;
    let mut controls = HistControls::default();
    let mut vars = Vars::default();
    let mut clock = String::from("global");
    for attr in attrs.split(':').filter(|attr| !attr.is_empty()) {
        if attr.starts_with("onmatch(") {
            vars.add_action(attr, fields)?;
            continue;
        }
        if attr.starts_with("onmax(") || attr.starts_with("onchange(") {
            vars.add_track(attr, fields)?;
            continue;
        }
        let (name, value) = attr.split_once('=').unwrap_or((attr, ""));
        match (name, value) {
            ("keys" | "key", list) if !list.is_empty() => {
                let mut parsed = Vec::new();
                for text in list.split(',') {
                    parsed.push(key_field(text, fields, &mut vars)?);
                }
                if parsed.len() > MAX_KEYS {
                    return Err(HistError::TooManyKeys);
                }
                keys = Some(parsed);
            }
            ("vals" | "val" | "values", list) if !list.is_empty() => {
                // The raw `hitcount` is always there; `hitcount.percent`
                // and `hitcount.graph` are columns of their own, as Linux's.
                vals = Vec::new();
                for text in list.split(',').filter(|field| *field != "hitcount") {
                    vals.push(val_field(text, fields, &mut vars)?);
                }
                if vals.len() > MAX_VALS {
                    return Err(HistError::TooManyVals);
                }
            }
            ("sort", list) if !list.is_empty() => sort_text = Some(list),
            ("size", number) => size = parse_size(number)?,
            (name @ ("keys" | "key" | "vals" | "val" | "values" | "sort"), "") => return Err(HistError::Empty(name.to_string())),
            ("pause", "") => controls.pause = true,
            ("cont" | "continue", "") => controls.cont = true,
            ("clear", "") => controls.clear = true,
            ("clock", name) if !name.is_empty() => clock = name.to_string(),
            // Linux's own attributes this kernel lacks: named tables,
            // handlers other than `onmatch`.
            ("name" | "clock", _) => return Err(HistError::Unknown(attr.to_string())),
            (_, value) if !value.is_empty() && !attr.contains('(') => vars.add_assignments(attr, fields)?,
            _ => return Err(HistError::Unknown(attr.to_string())),
        }
    }
    vars.finish()?;
    let keys = keys.ok_or(HistError::NoKeys)?;
    let sort = match sort_text {
        None => alloc::vec![SortKey { by: SortBy::Hitcount, descending: false }],
        Some(list) => {
            let sort = list.split(',').map(|key| sort_key(key, &keys, &vals)).collect::<Result<Vec<_>, _>>()?;
            if sort.len() > 2 {
                return Err(HistError::TooManySortKeys);
            }
            sort
        }
    };
    Ok(HistSpec { keys, vals, sort, size, vars, clock, controls })
}

/// `NAME[.MODIFIER]`: the field and its modifier.
fn field(text: &str, fields: &[FilterField]) -> Result<HistField, HistError> {
    let (name, modifier) = match text.split_once('.') {
        Some((name, modifier)) => (name, Modifier::from_name(modifier).ok_or_else(|| HistError::BadModifier(text.to_string()))?),
        None => (text, Modifier::Plain),
    };
    // Linux's generic keys: `common_cpu` and `common_comm`, and (where the
    // event has no field of the name) `cpu`, `CPU`, `comm`, `COMM`, all
    // shown by their `common_` name.
    let own = |name: &str| fields.iter().any(|field| field.name == name);
    let (source, kind) = match name {
        // A value column of hits (`val_field` takes it, with a modifier).
        "hitcount" => (Source::Cpu, FieldKind::Unsigned),
        // The call chain, as a key (`key_field` takes it, bare).
        "common_stacktrace" => (Source::Stack, FieldKind::Unsigned),
        "stacktrace" | "STACKTRACE" if !own(name) => (Source::Stack, FieldKind::Unsigned),
        _ => Source::find_common(name, fields).ok_or_else(|| HistError::NoSuchField(name.to_string()))?,
    };
    let counts_hits = name == "hitcount";
    let name = match source {
        _ if counts_hits => name,
        Source::Field(_) => name,
        Source::Cpu => "common_cpu",
        Source::Comm => "common_comm",
        Source::Stack => "common_stacktrace",
    };
    if kind == FieldKind::Array {
        return Err(HistError::ArrayField(name.to_string()));
    }
    Ok(HistField { name: name.to_string(), source, kind, modifier, counts_hits, expr: None })
}

/// Whether a key's or value's text is an expression (Linux parses both
/// with `parse_expr`). A modifier at the end is not part of it: the `-`
/// of `ip.sym-offset` is no operator.
fn is_expression(text: &str) -> bool {
    let body = match text.rsplit_once('.') {
        Some((body, name)) if Modifier::from_name(name).is_some() => body,
        _ => text,
    };
    body.starts_with('$') || body.contains(['+', '-', '*', '/'])
}

/// A key: a field (`NAME[.MODIFIER]`), or an expression of fields and
/// constants, with a number's modifier after it (`n*2.log2`). A key
/// cannot read another trigger's variable: variables are read by key.
fn key_field(text: &str, fields: &[FilterField], vars: &mut Vars) -> Result<HistField, HistError> {
    if is_expression(text) {
        let (expr_text, modifier) = match text.rsplit_once('.').map(|(expr, name)| (expr, Modifier::from_name(name))) {
            Some((expr, Some(modifier))) if is_expression(expr) => (expr, modifier),
            _ => (text, Modifier::Plain),
        };
        if expr_text.contains('$') {
            return Err(HistError::KeyReadsVariable(expr_text.to_string()));
        }
        if matches!(modifier, Modifier::Execname | Modifier::Percent | Modifier::Graph) {
            return Err(HistError::BadModifier(text.to_string()));
        }
        let expr = vars.value_expression(expr_text, fields)?;
        // As for an expression value, `source` goes unread.
        let (source, kind, name) = (Source::Cpu, FieldKind::Unsigned, expr_text.to_string());
        return Ok(HistField { name, source, kind, modifier, counts_hits: false, expr: Some(expr) });
    }
    let field = field(text, fields)?;
    if field.counts_hits {
        return Err(HistError::NoSuchField(field.name));
    }
    let fits = match field.modifier {
        Modifier::Plain => true,
        _ if field.source == Source::Stack => false,
        Modifier::Execname => field.name == "common_pid",
        Modifier::Percent | Modifier::Graph => false,
        _ => field.kind != FieldKind::String,
    };
    fits.then_some(field).ok_or_else(|| HistError::BadModifier(text.to_string()))
}

/// A value: a field (`NAME[.MODIFIER]`), or an expression of fields,
/// constants and `$NAME`s (its reads go in `vars`), as Linux parses a
/// value as an expression.
fn val_field(text: &str, fields: &[FilterField], vars: &mut Vars) -> Result<HistField, HistError> {
    if is_expression(text) {
        let expr = vars.value_expression(text, fields)?;
        // The hit works the expression out; `source` goes unread (as for
        // `hitcount`).
        let (source, kind, modifier) = (Source::Cpu, FieldKind::Unsigned, Modifier::Plain);
        return Ok(HistField { name: text.to_string(), source, kind, modifier, counts_hits: false, expr: Some(expr) });
    }
    let field = field(text, fields)?;
    if field.source == Source::Stack {
        return Err(HistError::KeyOnly(field.name));
    }
    if field.kind == FieldKind::String {
        return Err(HistError::NotANumber(field.name));
    }
    matches!(field.modifier, Modifier::Plain | Modifier::Hex | Modifier::Percent | Modifier::Graph)
        .then_some(field)
        .ok_or_else(|| HistError::BadModifier(text.to_string()))
}

fn sort_key(text: &str, keys: &[HistField], vals: &[HistField]) -> Result<SortKey, HistError> {
    let (name, descending) = match text.rsplit_once('.') {
        Some((name, "descending")) => (name, true),
        Some((name, "ascending")) => (name, false),
        _ => (text, false),
    };
    // A field may be named with its modifier, as `cat trigger` shows it.
    let named = |field: &HistField| field.name == name || field.spec() == name;
    let by = if name == "hitcount" {
        SortBy::Hitcount
    } else if let Some(key) = keys.iter().position(named) {
        SortBy::Key(key)
    } else if let Some(val) = vals.iter().position(named) {
        SortBy::Val(val)
    } else {
        return Err(HistError::BadSortKey(name.to_string()));
    };
    Ok(SortKey { by, descending })
}

/// `size=N`: decimal, `0x` hex or `0` octal (as Linux's `kstrtouint`
/// reads it), rounded up to a power of two, which must be 128 to 131072.
fn parse_size(text: &str) -> Result<usize, HistError> {
    let parsed = ftrace::number::c_ulong(text).and_then(|n| usize::try_from(n).ok());
    let size = parsed.and_then(usize::checked_next_power_of_two);
    size.filter(|size| (MIN_SIZE..=MAX_SIZE).contains(size)).ok_or_else(|| HistError::BadSize(text.to_string()))
}

impl HistSpec {
    /// Whether `other` is the same histogram (keys, values, sort), what an
    /// add collides with and a removal, `pause`, `cont` or `clear` finds
    /// (the size and the control word do not count, as in Linux).
    pub fn same_as(&self, other: &HistSpec) -> bool {
        self.keys == other.keys && self.vals == other.vals && self.sort == other.sort && self.vars == other.vars
    }

    /// Its variables, reads and actions.
    pub fn vars(&self) -> &Vars {
        &self.vars
    }

    /// The trace clock it needs, if it reads timestamps.
    pub fn clock(&self) -> Option<&str> {
        self.vars.uses_timestamp().then_some(self.clock.as_str())
    }

    /// `hist:keys=...:vals=...:sort=...:size=N`, as `cat trigger` shows it.
    pub fn line(&self) -> String {
        let list = |fields: &[HistField]| fields.iter().map(HistField::spec).collect::<Vec<_>>().join(",");
        let mut line = format!("hist:keys={}:vals=hitcount", list(&self.keys));
        for val in &self.vals {
            line.push(',');
            line.push_str(&val.spec());
        }
        line.push_str(&self.vars.defs_text());
        let sort: Vec<String> = self
            .sort
            .iter()
            .map(|key| {
                let name = match key.by {
                    SortBy::Hitcount => String::from("hitcount"),
                    SortBy::Key(n) => self.keys[n].spec(),
                    SortBy::Val(n) => self.vals[n].spec(),
                };
                if key.descending {
                    name + ".descending"
                } else {
                    name
                }
            })
            .collect();
        line.push_str(&format!(":sort={}:size={}", sort.join(","), self.size));
        if let Some(clock) = self.clock() {
            line.push_str(&format!(":clock={clock}"));
        }
        line.push_str(&self.vars.actions_text());
        line
    }

    fn key_words(&self) -> usize {
        self.keys.iter().map(HistField::key_words).sum()
    }
}

/// The table: see the module documentation.
pub struct HistMap {
    key_words: usize,
    /// Sums per entry: `hitcount`, then each value.
    sums_per_entry: usize,
    /// Variables per entry.
    vars_per_entry: usize,
    /// Entries at most (half the slots).
    capacity: usize,
    states: Box<[AtomicU8]>,
    keys: Box<[AtomicU64]>,
    sums: Box<[AtomicU64]>,
    /// Each entry's variables, and a word of bits per entry saying which
    /// are set (none for a table without variables).
    vars: Box<[AtomicU64]>,
    vars_set: Box<[AtomicU64]>,
    entries: AtomicUsize,
    hits: AtomicU64,
    drops: AtomicU64,
}

const FREE: u8 = 0;
const CLAIMED: u8 = 1;
const READY: u8 = 2;

/// Zeroed atomics, or `None` if the heap cannot hold them.
fn zeroed<T>(len: usize, zero: impl Fn() -> T) -> Option<Box<[T]>> {
    let mut words = Vec::new();
    words.try_reserve_exact(len).ok()?;
    words.extend((0..len).map(|_| zero()));
    Some(words.into_boxed_slice())
}

impl HistMap {
    /// A table of `capacity` entries of `key_words` key words,
    /// `sums_per_entry` sums and `vars_per_entry` variables; `None` if the
    /// heap cannot hold it.
    pub fn try_new(capacity: usize, key_words: usize, sums_per_entry: usize, vars_per_entry: usize) -> Option<HistMap> {
        let bytes = Self::bytes_of(2 * capacity, key_words, sums_per_entry, vars_per_entry);
        TABLES_BYTES
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(bytes).filter(|&total| total <= TABLES_BUDGET)
            })
            .ok()?;
        let map = Self::allocate(capacity, key_words, sums_per_entry, vars_per_entry);
        if map.is_none() {
            TABLES_BYTES.fetch_sub(bytes, Ordering::Relaxed);
        }
        map
    }

    /// The heap a table of `slots` slots takes (what [`TABLES_BUDGET`]
    /// counts): a state byte, then the key words, sums and variables (and
    /// their word of set bits), a slot.
    fn bytes_of(slots: usize, key_words: usize, sums_per_entry: usize, vars_per_entry: usize) -> usize {
        let set_words = usize::from(vars_per_entry > 0);
        slots * (1 + 8 * (key_words + sums_per_entry + vars_per_entry + set_words))
    }

    fn allocate(capacity: usize, key_words: usize, sums_per_entry: usize, vars_per_entry: usize) -> Option<HistMap> {
        let slots = 2 * capacity;
        let set_words = if vars_per_entry > 0 { slots } else { 0 };
        Some(HistMap {
            key_words,
            sums_per_entry,
            vars_per_entry,
            capacity,
            states: zeroed(slots, || AtomicU8::new(FREE))?,
            keys: zeroed(slots * key_words, || AtomicU64::new(0))?,
            sums: zeroed(slots * sums_per_entry, || AtomicU64::new(0))?,
            vars: zeroed(slots * vars_per_entry, || AtomicU64::new(0))?,
            vars_set: zeroed(set_words, || AtomicU64::new(0))?,
            entries: AtomicUsize::new(0),
            hits: AtomicU64::new(0),
            drops: AtomicU64::new(0),
        })
    }

    fn key_of(&self, slot: usize) -> &[AtomicU64] {
        &self.keys[slot * self.key_words..(slot + 1) * self.key_words]
    }

    fn sums_of(&self, slot: usize) -> &[AtomicU64] {
        &self.sums[slot * self.sums_per_entry..(slot + 1) * self.sums_per_entry]
    }

    fn key_is(&self, slot: usize, key: &[u64]) -> bool {
        self.key_of(slot).iter().zip(key).all(|(word, &want)| word.load(Ordering::Relaxed) == want)
    }

    /// Adds one hit of `key` with `vals` (after `hitcount`'s 1): its
    /// entry's slot, or `None` if it was dropped (the table is full, or a
    /// slot stayed claimed).
    pub fn insert(&self, key: &[u64], vals: &[u64]) -> Option<usize> {
        let mask = self.states.len() - 1;
        let mut slot = hash(key) & mask;
        for _ in 0..self.states.len() {
            if let Some(found) = self.claim_or_match(slot, key) {
                if found {
                    self.add(slot, vals);
                    return Some(slot);
                }
            } else {
                break; // full, or a slot that never became ready
            }
            slot = (slot + 1) & mask;
        }
        self.drops.fetch_add(1, Ordering::Relaxed);
        None
    }

    /// The slot of `key`'s entry, if it has one (ready: a key another CPU
    /// is still writing is not there yet).
    pub fn find(&self, key: &[u64]) -> Option<usize> {
        let mask = self.states.len() - 1;
        let mut slot = hash(key) & mask;
        for _ in 0..self.states.len() {
            match self.states[slot].load(Ordering::Acquire) {
                FREE => return None,
                READY if self.key_is(slot, key) => return Some(slot),
                _ => slot = (slot + 1) & mask,
            }
        }
        None
    }

    /// Sets variable `var` of the entry in `slot`.
    pub fn set_var(&self, slot: usize, var: usize, value: u64) {
        self.vars[slot * self.vars_per_entry + var].store(value, Ordering::Relaxed);
        // Release: a reader that sees the bit sees the value.
        self.vars_set[slot].fetch_or(1 << var, Ordering::Release);
    }

    /// Variable `var` of the entry in `slot`, if it is set; `once` unsets
    /// it (Linux's `read_once`).
    pub fn read_var(&self, slot: usize, var: usize, once: bool) -> Option<u64> {
        let bit = 1u64 << var;
        let set = match once {
            true => self.vars_set[slot].fetch_and(!bit, Ordering::Acquire),
            false => self.vars_set[slot].load(Ordering::Acquire),
        };
        (set & bit != 0).then(|| self.vars[slot * self.vars_per_entry + var].load(Ordering::Relaxed))
    }

    /// Whether `slot` is `key`'s (claiming it if it is free): `Some(false)`
    /// for another key's, `None` when the hit must be dropped.
    fn claim_or_match(&self, slot: usize, key: &[u64]) -> Option<bool> {
        let state = &self.states[slot];
        for _ in 0..CLAIM_SPINS {
            match state.load(Ordering::Acquire) {
                READY => return Some(self.key_is(slot, key)),
                FREE => {
                    if self.entries.fetch_add(1, Ordering::Relaxed) >= self.capacity {
                        self.entries.fetch_sub(1, Ordering::Relaxed);
                        return None;
                    }
                    if state.compare_exchange(FREE, CLAIMED, Ordering::Acquire, Ordering::Acquire).is_err() {
                        // Another CPU claimed it first: look again.
                        self.entries.fetch_sub(1, Ordering::Relaxed);
                        continue;
                    }
                    for (word, &value) in self.key_of(slot).iter().zip(key) {
                        word.store(value, Ordering::Relaxed);
                    }
                    state.store(READY, Ordering::Release);
                    return Some(true);
                }
                _ => core::hint::spin_loop(), // being filled in by another CPU
            }
        }
        None
    }

    fn add(&self, slot: usize, vals: &[u64]) {
        let sums = self.sums_of(slot);
        sums[0].fetch_add(1, Ordering::Relaxed);
        for (sum, &value) in sums[1..].iter().zip(vals) {
            sum.fetch_add(value, Ordering::Relaxed);
        }
        self.hits.fetch_add(1, Ordering::Relaxed);
    }

    /// Every entry: its key words and its sums (`hitcount` first).
    pub fn entries(&self) -> Vec<(Vec<u64>, Vec<u64>)> {
        self.entries_with_vars().into_iter().map(|(key, sums, _)| (key, sums)).collect()
    }

    /// Every entry: its key words, its sums and its variables' words.
    pub fn entries_with_vars(&self) -> Vec<(Vec<u64>, Vec<u64>, Vec<u64>)> {
        (0..self.states.len())
            .filter(|&slot| self.states[slot].load(Ordering::Acquire) == READY)
            .map(|slot| {
                let words = |atomics: &[AtomicU64]| atomics.iter().map(|word| word.load(Ordering::Relaxed)).collect();
                let vars = &self.vars[slot * self.vars_per_entry..(slot + 1) * self.vars_per_entry];
                (words(self.key_of(slot)), words(self.sums_of(slot)), words(vars))
            })
            .collect()
    }

    /// Hits counted, and hits dropped.
    pub fn totals(&self) -> (u64, u64) {
        (self.hits.load(Ordering::Relaxed), self.drops.load(Ordering::Relaxed))
    }

    /// Empties the table, first step: every slot free, so a lookup (another
    /// trigger reading this one's variables) finds nothing from now on.
    /// Only while no hit inserts (see [`Histogram::clear`]).
    fn free_all(&self) {
        for state in self.states.iter() {
            state.store(FREE, Ordering::Release);
        }
        self.entries.store(0, Ordering::Relaxed);
        self.hits.store(0, Ordering::Relaxed);
        self.drops.store(0, Ordering::Relaxed);
    }

    /// Empties the table, second step: the words zeroed, once no lookup
    /// that found a slot before [`free_all`](Self::free_all) can still be
    /// reading it.
    fn zero(&self) {
        for word in self.keys.iter().chain(self.sums.iter()).chain(self.vars.iter()).chain(self.vars_set.iter()) {
            word.store(0, Ordering::Relaxed);
        }
    }
}

impl Drop for HistMap {
    fn drop(&mut self) {
        let bytes = Self::bytes_of(self.states.len(), self.key_words, self.sums_per_entry, self.vars_per_entry);
        TABLES_BYTES.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// FNV-1a over the key's words.
fn hash(key: &[u64]) -> usize {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for word in key {
        for byte in word.to_le_bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    hash as usize
}

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
mod tests {
    extern crate std;

    use super::*;

    fn fields() -> Vec<FilterField> {
        alloc::vec![
            FilterField::new("common_pid", FieldKind::Signed),
            FilterField::new("prev_comm", FieldKind::String),
            FilterField::new("prev_pid", FieldKind::Signed),
            FilterField::new("ip", FieldKind::Unsigned),
            FilterField::new("bytes", FieldKind::Unsigned),
        ]
    }

    fn spec(text: &str) -> HistSpec {
        parse(text, &fields()).unwrap_or_else(|error| panic!("{text}: {error}"))
    }

    #[test]
    fn lines_read_back_as_linux_prints_them() {
        assert_eq!(spec("keys=prev_pid").line(), "hist:keys=prev_pid:vals=hitcount:sort=hitcount:size=2048");
        assert_eq!(
            spec("keys=common_pid.execname,ip.sym:vals=bytes,hitcount:sort=bytes.descending,hitcount:size=1000").line(),
            "hist:keys=common_pid.execname,ip.sym:vals=hitcount,bytes:sort=bytes.descending,hitcount:size=1024"
        );
        assert_eq!(spec("key=ip.hex:size=65").line(), "hist:keys=ip.hex:vals=hitcount:sort=hitcount:size=128");
        assert_eq!(spec("keys=ip:size=0x800").line(), "hist:keys=ip:vals=hitcount:sort=hitcount:size=2048", "hex, as kstrtouint");
        assert_eq!(spec("keys=prev_pid:pause").controls.on_existing(), Some(HistControl::Pause));
        for line in ["keys=prev_pid:pause:cont", "keys=prev_pid:cont:pause", "keys=prev_pid:clear:pause"] {
            assert_eq!(spec(line).controls.on_existing(), Some(HistControl::Pause), "pause first, as in Linux: {line}");
        }
        assert_eq!(spec("keys=prev_pid:clear:cont").controls.on_existing(), Some(HistControl::Cont), "then cont");
        assert!(spec("keys=prev_pid:pause:cont").controls.needs_existing(), "cont: on an existing one only");
        assert!(!spec("keys=prev_pid:pause").controls.needs_existing());
        assert!(spec("keys=prev_pid:size=4096:clear").same_as(&spec("keys=prev_pid")), "size and control do not count");
        assert!(!spec("keys=prev_pid").same_as(&spec("keys=prev_pid.hex")));
    }

    #[test]
    fn bad_lines_say_why() {
        let error = |text: &str| parse(text, &fields()).unwrap_err();
        assert_eq!(error("vals=bytes"), HistError::NoKeys);
        assert_eq!(error("keys="), HistError::Empty("keys".into()));
        assert_eq!(error("keys=ip:sort="), HistError::Empty("sort".into()));
        assert_eq!(error("keys=nosuch"), HistError::NoSuchField("nosuch".into()));
        assert_eq!(error("keys=prev_pid.bogus"), HistError::BadModifier("prev_pid.bogus".into()));
        assert_eq!(error("keys=prev_pid.execname"), HistError::BadModifier("prev_pid.execname".into()));
        assert_eq!(error("keys=prev_comm.hex"), HistError::BadModifier("prev_comm.hex".into()));
        for bad in ["prev_pid.buckets=0", "prev_pid.buckets=", "prev_pid.buckets=x", "prev_pid.buckets", "prev_comm.buckets=4"] {
            assert_eq!(error(&format!("keys={bad}")), HistError::BadModifier(bad.into()));
        }
        assert_eq!(
            error("keys=prev_pid:vals=prev_pid.buckets=4"),
            HistError::BadModifier("prev_pid.buckets=4".into()),
            "keys only"
        );
        assert_eq!(error("keys=ip:vals=prev_comm"), HistError::NotANumber("prev_comm".into()));
        assert_eq!(error("keys=ip,bytes,prev_pid,common_pid"), HistError::TooManyKeys);
        assert_eq!(error("keys=ip:vals=bytes,ip,prev_pid,common_pid"), HistError::TooManyVals);
        assert_eq!(error("keys=ip:sort=bytes"), HistError::BadSortKey("bytes".into()));
        assert_eq!(error("keys=ip:size=0"), HistError::BadSize("0".into()));
        assert_eq!(error("keys=ip:size=64"), HistError::BadSize("64".into()), "under 128, as Linux refuses it");
        assert_eq!(error("keys=ip:size=200000"), HistError::BadSize("200000".into()));
        assert_eq!(error("keys=ip:size=0+400"), HistError::BadSize("0+400".into()), "a sign only first, as kstrtouint");
        assert_eq!(error("keys=ip:name=foo"), HistError::Unknown("name=foo".into()));
        assert_eq!(error("keys=ip:onmax($x).save(ip)"), HistError::Expr(ExprError::NotOwnVar("x".into())));
        assert_eq!(error("keys=ip:x=ip:onmax($x).save(nosuch)"), HistError::Expr(ExprError::BadOperand("nosuch".into())));
        assert_eq!(error("keys=ip:x=ip:onmax(x).save(ip)"), HistError::Expr(ExprError::BadAction("onmax(x).save(ip)".into())));
    }

    /// One event: `prev_pid`, `prev_comm`, `bytes` (the others 0).
    fn hit(histogram: &Histogram, pid: i64, comm: &'static [u8], bytes: u64) {
        histogram.hit(
            &|index| match index {
                0 | 2 => FieldValue::Signed(pid),
                1 => FieldValue::Str(comm),
                3 => FieldValue::Unsigned(0x1010),
                _ => FieldValue::Unsigned(bytes),
            },
            &|| bytes * 1000,
            &|words| words.iter_mut().zip([0x1010, 0x1020, 0x9999]).for_each(|(word, address)| *word = address),
        );
    }

    fn output(histogram: &Histogram) -> String {
        let mut out = String::new();
        let names = |address: usize| {
            (0x1000..0x1100).contains(&address).then_some(Symbol { name: "kernel::workload::fib", address: 0x1000, size: 0x100 })
        };
        let comms = |pid: i32| (pid == 7).then(|| String::from("fib-worker"));
        histogram.write(&histogram.spec.line(), &mut out, &names, &comms).unwrap();
        out
    }

    #[test]
    fn string_keys_that_differ_late_are_two_keys() {
        let histogram = Histogram::try_new(spec("keys=prev_comm")).unwrap();
        hit(&histogram, 1, b"kernel::workload::napping_fib+0x20/0x4c\0", 0);
        hit(&histogram, 1, b"kernel::workload::napping_fib+0x3c/0x4c\0", 0);
        hit(&histogram, 1, b"kernel::workload::napping_fib+0x3c/0x4c\0", 0);
        let text = output(&histogram);
        assert!(text.contains("    Hits: 3\n    Entries: 2\n"), "{text}");
        assert!(text.contains("{ prev_comm: kernel::workload::napping_fib+0x3c/0x4c"), "{text}");
    }

    #[test]
    fn counts_sums_and_prints_as_linux() {
        let histogram = Histogram::try_new(spec("keys=prev_pid:vals=bytes")).unwrap();
        for (pid, bytes) in [(7, 10), (3, 1), (7, 20), (7, 30), (-1, 5)] {
            hit(&histogram, pid, b"fib\0\0\0", bytes);
        }
        assert_eq!(
            output(&histogram),
            "# event histogram\n#\n# trigger info: hist:keys=prev_pid:vals=hitcount,bytes:sort=hitcount:size=2048\n#\n\n\
             { prev_pid: 18446744073709551615 } hitcount:          1  bytes:          5\n\
             { prev_pid:          3 } hitcount:          1  bytes:          1\n\
             { prev_pid:          7 } hitcount:          3  bytes:         60\n\
             \nTotals:\n    Hits: 5\n    Entries: 3\n    Dropped: 0\n"
        );
        // Between its two waits the slots are free (a reader of its
        // variables finds no entry) before any word is zeroed.
        let waits = core::cell::Cell::new(0);
        let key = [7u64];
        histogram.clear(|| {
            waits.set(waits.get() + 1);
            if waits.get() == 2 {
                assert_eq!(histogram.map.find(&key), None, "freed before zeroed");
                assert!(histogram.map.keys.iter().any(|word| word.load(Ordering::Relaxed) == 7), "not zeroed yet");
            }
        });
        assert_eq!(waits.get(), 2);
        assert!(histogram.map.keys.iter().all(|word| word.load(Ordering::Relaxed) == 0));
        assert!(output(&histogram).ends_with("#\n\n\nTotals:\n    Hits: 0\n    Entries: 0\n    Dropped: 0\n"));
        histogram.set_paused(true);
        hit(&histogram, 1, b"x", 1);
        assert_eq!(histogram.map.totals(), (0, 0), "a paused histogram counts nothing");
    }

    #[test]
    fn percent_and_graph_show_a_values_share_of_its_column() {
        let histogram = Histogram::try_new(spec("keys=prev_pid:vals=hitcount.percent,bytes.graph:sort=prev_pid")).unwrap();
        // As Linux has it: the raw hitcount first, `hitcount.percent` a
        // column of its own.
        assert_eq!(
            histogram.spec().line(),
            "hist:keys=prev_pid:vals=hitcount,hitcount.percent,bytes.graph:sort=prev_pid:size=2048"
        );
        for (pid, bytes) in [(1, 40), (2, 10), (2, 0), (3, 20)] {
            hit(&histogram, pid, b"", bytes);
        }
        let out = output(&histogram);
        let lines: Vec<&str> = out.lines().filter(|line| line.starts_with('{')).collect();
        let bar = |hashes: usize| format!("{}{}", "#".repeat(hashes), " ".repeat(20 - hashes));
        assert_eq!(
            lines[0],
            format!("{{ prev_pid:          1 }} hitcount:          1  hitcount (%):  25.00  bytes: {}", bar(20))
        );
        assert_eq!(lines[1], format!("{{ prev_pid:          2 }} hitcount:          2  hitcount (%):  50.00  bytes: {}", bar(5)));
        assert_eq!(
            lines[2],
            format!("{{ prev_pid:          3 }} hitcount:          1  hitcount (%):  25.00  bytes: {}", bar(10))
        );
        let plain = spec("keys=prev_pid:vals=hitcount,bytes");
        assert!(!plain.same_as(&spec("keys=prev_pid:vals=hitcount.percent,bytes")), "a removal names the modifier too");
        assert_eq!(
            (hundredths_of_percent(0, 0), hundredths_of_percent(1, 3), hundredths_of_percent(u64::MAX, u64::MAX)),
            (Some(0), Some(3333), Some(10_000))
        );
        let again = spec("keys=prev_pid:vals=hitcount.percent,bytes.graph:sort=prev_pid");
        assert!(again.same_as(&spec(&histogram.spec().line()["hist:".len()..])), "the line it shows names it");
        for bad in
            ["keys=prev_pid.percent", "keys=prev_pid.graph", "keys=prev_pid:vals=hitcount.log2", "keys=prev_pid:vals=bytes.log2"]
        {
            assert!(matches!(parse(bad, &fields()), Err(HistError::BadModifier(_))), "{bad}");
        }
        assert_eq!(parse("keys=hitcount", &fields()).unwrap_err(), HistError::NoSuchField("hitcount".into()));
    }

    #[test]
    fn modifiers_strings_and_sorting() {
        let histogram =
            Histogram::try_new(spec("keys=common_pid.execname,prev_comm,ip.sym:vals=bytes.hex:sort=bytes.descending")).unwrap();
        hit(&histogram, 7, b"worker\0", 0x10);
        hit(&histogram, 3, b"shell", 0xff);
        let out = output(&histogram);
        let lines: Vec<&str> = out.lines().filter(|line| line.starts_with('{')).collect();
        let comm = format!("{:<50}", "shell");
        let sym = format!("{:<45}", "kernel::workload::fib");
        assert_eq!(
            lines[0],
            format!("{{ common_pid: <...>           [         3], prev_comm: {comm}, ip: [1010] {sym} }} hitcount:          1  bytes:         ff")
        );
        assert!(lines[1].starts_with("{ common_pid: fib-worker      [         7], prev_comm: worker "), "{}", lines[1]);
        let log2 = Histogram::try_new(spec("keys=bytes.log2:sort=bytes")).unwrap();
        for bytes in [0, 1, 3, 4, 5, 1000] {
            hit(&log2, 1, b"", bytes);
        }
        let out = output(&log2);
        let keys: Vec<&str> = out.lines().filter(|line| line.starts_with('{')).map(|line| &line[..16]).collect();
        assert_eq!(keys, ["{ bytes: ~ 2^0  ", "{ bytes: ~ 2^2  ", "{ bytes: ~ 2^3  ", "{ bytes: ~ 2^10 "]);
        assert_eq!((log2_bucket(u64::MAX), log2_bucket(1 << 63)), (64, 63), "no overflow at the top");
        // buckets=SIZE: a range of SIZE values per key, as Linux prints it.
        let buckets = Histogram::try_new(spec("keys=bytes.buckets=10:sort=bytes")).unwrap();
        assert_eq!(buckets.spec().line(), "hist:keys=bytes.buckets=10:vals=hitcount:sort=bytes.buckets=10:size=2048");
        for bytes in [0, 9, 10, 19, 25, u64::MAX] {
            hit(&buckets, 1, b"", bytes);
        }
        let out = output(&buckets);
        let keys: Vec<&str> =
            out.lines().filter(|line| line.starts_with('{')).map(|line| line.split(" }").next().unwrap()).collect();
        let top = format!("{{ bytes: ~ {}-{}", u64::MAX - u64::MAX % 10, u64::MAX);
        assert_eq!(keys, ["{ bytes: ~ 0-9", "{ bytes: ~ 10-19", "{ bytes: ~ 20-29", &top]);
        assert!(out.contains("{ bytes: ~ 0-9 } hitcount:          2"), "{out}");
    }

    #[test]
    fn a_stacktrace_key_counts_each_chain_and_prints_a_frame_a_line() {
        let histogram = Histogram::try_new(spec("keys=stacktrace")).unwrap();
        assert_eq!(histogram.spec().line(), "hist:keys=common_stacktrace:vals=hitcount:sort=hitcount:size=2048");
        hit(&histogram, 1, b"a", 1);
        hit(&histogram, 2, b"b", 2);
        let out = output(&histogram);
        let entry = "{ common_stacktrace:\n         kernel::workload::fib+0x10/0x100\n         kernel::workload::fib+0x20/0x100\n         0x9999\n} hitcount:          2\n";
        assert!(out.contains(entry), "one chain, twice: {out}");
        let other = Histogram::try_new(spec("keys=common_stacktrace,prev_pid")).unwrap();
        hit(&other, 5, b"a", 1);
        assert!(output(&other).contains("         0x9999\n, prev_pid:          5} hitcount:          1"), "{}", output(&other));
        assert_eq!(
            parse("keys=common_stacktrace.hex", &fields()).unwrap_err(),
            HistError::BadModifier("common_stacktrace.hex".into())
        );
        assert_eq!(
            parse("keys=prev_pid:vals=stacktrace", &fields()).unwrap_err(),
            HistError::KeyOnly("common_stacktrace".into())
        );
    }

    #[test]
    fn generic_keys_read_the_recording_cpu_and_task() {
        // The host's stand-ins: CPU 1, task "host".
        let histogram = Histogram::try_new(spec("keys=cpu,comm:vals=bytes")).unwrap();
        assert_eq!(histogram.spec().line(), "hist:keys=common_cpu,common_comm:vals=hitcount,bytes:sort=hitcount:size=2048");
        hit(&histogram, 7, b"worker", 5);
        let out = output(&histogram);
        let line = out.lines().find(|line| line.starts_with('{')).unwrap();
        assert!(line.starts_with("{ common_cpu:          1, common_comm: host "), "{line}");
        assert!(line.ends_with("} hitcount:          1  bytes:          5"), "{line}");
        let own = parse("keys=prev_comm,common_cpu,common_comm", &fields()).unwrap();
        assert_eq!(own.line(), "hist:keys=prev_comm,common_cpu,common_comm:vals=hitcount:sort=hitcount:size=2048");
        let with_comm = [FilterField::new("comm", FieldKind::String)];
        assert_eq!(
            parse("keys=comm", &with_comm).unwrap().line(),
            "hist:keys=comm:vals=hitcount:sort=hitcount:size=2048",
            "its own first"
        );
        assert_eq!(parse("keys=cpus", &fields()).unwrap_err(), HistError::NoSuchField("cpus".into()));
    }

    /// What a mock synthetic event was given.
    #[derive(Default)]
    struct Recorded(std::sync::Mutex<Vec<Vec<u64>>>);

    impl SynthTarget for Recorded {
        fn fire(&self, values: &[FieldValue]) {
            let numbers = values.iter().map(|value| number(*value, Modifier::Plain)).collect();
            self.0.lock().unwrap().push(numbers);
        }
    }

    /// For a histogram without `.snapshot()`: never asked for.
    fn no_snapshot() -> Result<Arc<dyn SnapshotTarget>, HistError> {
        unreachable!("no .snapshot() action")
    }

    /// A mock snapshot buffer: how often it was taken and released, and
    /// whether a swap is refused (another under way).
    #[derive(Default)]
    struct Snapshots {
        taken: AtomicUsize,
        released: AtomicUsize,
        busy: AtomicBool,
    }

    impl SnapshotTarget for Snapshots {
        fn take(&self) -> bool {
            if self.busy.load(Ordering::Relaxed) {
                return false;
            }
            self.taken.fetch_add(1, Ordering::Relaxed);
            true
        }

        fn release(&self) {
            self.released.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn onmax_snapshot_takes_one_each_time_a_value_passes_every_entrys() {
        let mut hist = Histogram::try_new(spec("keys=prev_pid:v=bytes:onmax($v).snapshot()")).unwrap();
        assert_eq!(hist.spec().line(), "hist:keys=prev_pid:vals=hitcount:v=bytes:sort=hitcount:size=2048:onmax($v).snapshot()");
        let refused = hist.resolve(|_| None, |_| None, || Err(HistError::NoMemory));
        assert_eq!(refused.unwrap_err(), HistError::NoMemory, "no snapshot buffer: refused");
        let snapshots = Arc::new(Snapshots::default());
        let target: Arc<dyn SnapshotTarget> = snapshots.clone();
        hist.resolve(|_| None, |_| None, || Ok(target)).unwrap();
        hit(&hist, 3, b"", 0);
        assert!(!output(&hist).contains("Snapshot taken"), "none taken yet: a first 0 is no new max (tracked from 0)");
        snapshots.busy.store(true, Ordering::Relaxed);
        hit(&hist, 3, b"", 40);
        snapshots.busy.store(false, Ordering::Relaxed);
        assert!(!output(&hist).contains("Snapshot taken"), "a swap refused is not recorded");
        for (pid, bytes) in [(1, 10), (2, 5), (2, 30), (1, 20), (2, 30)] {
            hit(&hist, pid, b"", bytes);
        }
        assert_eq!(
            snapshots.taken.load(Ordering::Relaxed),
            2,
            "at 10, the first, and at 30; not at 5 or 20, each its entry's max"
        );
        let out = output(&hist);
        assert!(!out.contains("\tmax:"), "no max line per entry, as Linux's print_actions skips a snapshot: {out}");
        let details = "\nSnapshot taken (see tracing/snapshot).  Details:\n\ttriggering value { onmax($v) }:         30\ttriggered by event with key: { prev_pid:          2 }\n\nTotals:";
        assert!(out.contains(details), "{out}");
        hist.detach();
        assert_eq!(snapshots.released.load(Ordering::Relaxed), 1, "released when its trigger goes");
        drop(hist);
        assert_eq!(snapshots.released.load(Ordering::Relaxed), 2, "and on drop (a release after the first does nothing)");
        let bad = Vars::default().add_track("onmax($v).snapshot(x)", &fields()).unwrap_err();
        assert!(matches!(bad, ExprError::BadAction(_)), "{bad:?}");
        let two = parse("keys=prev_pid:v=bytes:onmax($v).snapshot():onchange($v).snapshot()", &fields()).unwrap_err();
        assert_eq!(two, HistError::Expr(ExprError::SecondSnapshot));
    }

    #[test]
    fn values_may_be_expressions_and_variables_of_other_histograms() {
        let hist = Histogram::try_new(spec("keys=prev_pid:vals=bytes-1,bytes*2:sort=bytes-1.descending")).unwrap();
        assert_eq!(hist.spec().line(), "hist:keys=prev_pid:vals=hitcount,bytes-1,bytes*2:sort=bytes-1.descending:size=2048");
        for (pid, bytes) in [(1, 10), (1, 5), (2, 100)] {
            hit(&hist, pid, b"", bytes);
        }
        let out = output(&hist);
        let rows: Vec<&str> = out.lines().filter(|line| line.starts_with('{')).collect();
        assert_eq!(
            rows,
            [
                "{ prev_pid:          2 } hitcount:          1  bytes-1:         99  bytes*2:        200",
                "{ prev_pid:          1 } hitcount:          2  bytes-1:         13  bytes*2:         30"
            ]
        );
        // `$NAME`: another histogram's variable, read by this hit's key.
        let start = Arc::new(Histogram::try_new(spec("keys=prev_pid:t=bytes")).unwrap());
        let mut sums = Histogram::try_new(spec("keys=prev_pid:vals=$t")).unwrap();
        sums.resolve(|name| (name == "t").then(|| (start.clone(), 0)), |_| None, no_snapshot).unwrap();
        hit(&start, 1, b"", 7);
        hit(&sums, 1, b"", 0);
        hit(&sums, 1, b"", 0);
        hit(&sums, 2, b"", 0); // no t for pid 2: not counted
        assert!(output(&sums).contains("{ prev_pid:          1 } hitcount:          2  $t:         14"), "{}", output(&sums));
        assert_eq!(
            parse("keys=prev_pid:vals=bytes-nosuch", &fields()).unwrap_err(),
            HistError::Expr(ExprError::BadOperand("nosuch".into()))
        );
    }

    #[test]
    fn keys_may_be_expressions_with_a_numbers_modifier() {
        let hist = Histogram::try_new(spec("keys=bytes/10,bytes*2.log2:sort=bytes/10")).unwrap();
        assert_eq!(hist.spec().line(), "hist:keys=bytes/10,bytes*2.log2:vals=hitcount:sort=bytes/10:size=2048");
        for bytes in [5, 12, 14, 40] {
            hit(&hist, 1, b"", bytes);
        }
        let out = output(&hist);
        let rows: Vec<&str> = out.lines().filter(|line| line.starts_with('{')).collect();
        // 5: 0 and 2^4 (10); 12, 14: 1 and 2^5 (24, 28); 40: 4 and 2^7 (80).
        assert_eq!(
            rows,
            [
                "{ bytes/10:          0, bytes*2: ~ 2^4  } hitcount:          1",
                "{ bytes/10:          1, bytes*2: ~ 2^5  } hitcount:          2",
                "{ bytes/10:          4, bytes*2: ~ 2^7  } hitcount:          1"
            ]
        );
        assert_eq!(parse("keys=bytes-$t", &fields()).unwrap_err(), HistError::KeyReadsVariable("bytes-$t".into()));
        assert_eq!(parse("keys=bytes*2.graph", &fields()).unwrap_err(), HistError::BadModifier("bytes*2.graph".into()));
        // The `-` of a modifier is no operator.
        assert_eq!(spec("keys=ip.sym-offset").line(), "hist:keys=ip.sym-offset:vals=hitcount:sort=hitcount:size=2048");
    }

    #[test]
    fn onmax_and_onchange_can_record_a_synthetic_event() {
        let line = "keys=prev_pid:v=bytes:onmax($v).trace(big,$v,prev_pid):onchange($v).moved($v)";
        let mut hist = Histogram::try_new(spec(line)).unwrap();
        assert_eq!(
            hist.spec().line(),
            "hist:keys=prev_pid:vals=hitcount:v=bytes:sort=hitcount:size=2048:onmax($v).trace(big,$v,prev_pid):onchange($v).moved($v)"
        );
        let (big, moved) = (Arc::new(Recorded::default()), Arc::new(Recorded::default()));
        let targets: [(&str, Arc<dyn SynthTarget>, usize); 2] = [("big", big.clone(), 2), ("moved", moved.clone(), 1)];
        let synth = |name: &str| {
            let (_, target, fields) = targets.iter().find(|(known, _, _)| *known == name)?;
            Some((target.clone(), alloc::vec![false; *fields]))
        };
        hist.resolve(|_| None, synth, no_snapshot).unwrap();
        for (pid, bytes) in [(1, 10), (1, 5), (1, 30), (2, 7), (2, 7), (1, 30)] {
            hit(&hist, pid, b"", bytes);
        }
        assert_eq!(*big.0.lock().unwrap(), [[10, 1], [30, 1], [7, 2]], "each entry's new largest");
        assert_eq!(*moved.0.lock().unwrap(), [[10], [5], [30], [7]], "each entry's change");
        // Mixed with `onmatch()` and `.save()`: each call gets its own
        // event, and the line reads back in the order it was written.
        let line = "keys=prev_pid:v=bytes:onmax($v).trace(big,$v,prev_pid):onmatch(a.b).every($v):onchange($v).save(prev_comm):onchange($v).moved($v)";
        let mut mixed = Histogram::try_new(spec(line)).unwrap();
        assert!(mixed.spec().line().ends_with(&line["keys=prev_pid:v=bytes".len()..]), "{}", mixed.spec().line());
        let (big, moved, every) = (Arc::new(Recorded::default()), Arc::new(Recorded::default()), Arc::new(Recorded::default()));
        let targets: [(&str, Arc<dyn SynthTarget>, usize); 3] =
            [("big", big.clone(), 2), ("moved", moved.clone(), 1), ("every", every.clone(), 1)];
        let mixed_synth = |name: &str| {
            let (_, target, fields) = targets.iter().find(|(known, _, _)| *known == name)?;
            Some((target.clone(), alloc::vec![false; *fields]))
        };
        mixed.resolve(|_| None, mixed_synth, no_snapshot).unwrap();
        for (pid, bytes) in [(1, 10), (1, 5), (1, 5)] {
            hit(&mixed, pid, b"", bytes);
        }
        assert_eq!(*every.0.lock().unwrap(), [[10], [5], [5]], "onmatch: every hit");
        assert_eq!(*big.0.lock().unwrap(), [[10, 1]]);
        assert_eq!(*moved.0.lock().unwrap(), [[10], [5]]);
        let mut wrong = Histogram::try_new(spec("keys=prev_pid:v=bytes:onmax($v).big($v)")).unwrap();
        assert!(matches!(wrong.resolve(|_| None, synth, no_snapshot), Err(HistError::ParamMismatch(_))), "big has two fields");
    }

    #[test]
    fn a_variable_read_once_by_key_makes_one_latency_per_start() {
        // `prev_pid` plays the pid in both; `bytes * 1000` is the clock.
        let start = Arc::new(Histogram::try_new(spec("keys=prev_pid:ts0=common_timestamp.usecs")).unwrap());
        assert_eq!(
            start.spec().line(),
            "hist:keys=prev_pid:vals=hitcount:ts0=common_timestamp.usecs:sort=hitcount:size=2048:clock=global"
        );
        let mut end = Histogram::try_new(spec(
            "keys=prev_pid:lat=common_timestamp.usecs-$ts0:onmatch(sched.sched_wakeup).trace(wakeup_latency,$lat,prev_pid)",
        ))
        .unwrap();
        let recorded = Arc::new(Recorded::default());
        let target: Arc<dyn SynthTarget> = recorded.clone();
        let missing = end.resolve(|_| None, |_| Some((target.clone(), alloc::vec![false, false])), no_snapshot);
        assert_eq!(
            missing.map_err(|e| e.to_string()),
            Err("hist: no histogram of this trace array defines '$ts0' (or several do)".into())
        );
        let one_field = end.resolve(|_| Some((start.clone(), 0)), |_| Some((target.clone(), alloc::vec![false])), no_snapshot);
        assert!(matches!(one_field, Err(HistError::ParamMismatch(_))), "two params for one field");
        let string = end.resolve(|_| Some((start.clone(), 0)), |_| Some((target.clone(), alloc::vec![false, true])), no_snapshot);
        assert!(matches!(string, Err(HistError::ParamMismatch(_))), "a number for a string");
        end.resolve(
            |name| (name == "ts0").then(|| (start.clone(), 0)),
            |_| Some((target.clone(), alloc::vec![false, false])),
            no_snapshot,
        )
        .unwrap();
        hit(&end, 7, b"", 50); // no start for pid 7 yet: nothing
        hit(&start, 7, b"", 100); // ts0 = 100 us
        hit(&start, 8, b"", 120);
        hit(&end, 7, b"", 130); // 30 us later
        hit(&end, 7, b"", 140); // ts0 was read once: nothing
        hit(&end, 8, b"", 125);
        assert_eq!(*recorded.0.lock().unwrap(), [[30, 7], [5, 8]]);
        assert_eq!(end.map.totals(), (2, 0), "the hits without a start are not counted");
        let other_keys = Histogram::try_new(spec("keys=prev_comm:x=$ts0")).unwrap();
        assert!(!other_keys.keys_match(&start));
    }

    #[test]
    fn a_variables_units_carry_along_a_chain_of_histograms() {
        // ts0 holds microseconds; `copy` holds $ts0, so microseconds too
        // (worked out once, when `copy`'s histogram is resolved).
        let start = Arc::new(Histogram::try_new(spec("keys=prev_pid:ts0=common_timestamp.usecs")).unwrap());
        let mut copy = Histogram::try_new(spec("keys=prev_pid:copy=$ts0")).unwrap();
        assert!(!copy.var_usecs(0), "unresolved: not known yet");
        copy.resolve(|name| (name == "ts0").then(|| (start.clone(), 0)), |_| None, no_snapshot).unwrap();
        assert!(start.var_usecs(0) && copy.var_usecs(0));
        let copy = Arc::new(copy);
        let find = |name: &str| (name == "copy").then(|| (copy.clone(), 0));
        let mut mixed = Histogram::try_new(spec("keys=prev_pid:d=common_timestamp-$copy")).unwrap();
        let refused = mixed.resolve(find, |_| None, no_snapshot);
        assert!(refused.is_err_and(|error| error.to_string().contains("usecs")), "nanoseconds minus microseconds");
        let mut same = Histogram::try_new(spec("keys=prev_pid:d=common_timestamp.usecs-$copy")).unwrap();
        same.resolve(find, |_| None, no_snapshot).unwrap();
        assert!(same.var_usecs(0));
    }

    #[test]
    fn onmax_and_onchange_keep_a_value_and_the_fields_of_its_hit() {
        let max = Histogram::try_new(spec("keys=prev_pid:v=bytes:onmax($v).save(prev_comm,ip)")).unwrap();
        assert_eq!(
            max.spec().line(),
            "hist:keys=prev_pid:vals=hitcount:v=bytes:sort=hitcount:size=2048:onmax($v).save(prev_comm,ip)"
        );
        let change = Histogram::try_new(spec("keys=prev_pid:v=bytes:onchange($v).save(prev_comm)")).unwrap();
        for (comm, bytes) in [(&b"first\0"[..], 10), (b"second\0", 30), (b"third\0", 20), (b"fourth\0", 20)] {
            hit(&max, 7, comm, bytes);
            hit(&change, 7, comm, bytes);
        }
        let entry = |histogram: &Histogram| {
            let out = output(histogram);
            out[out.find('{').unwrap()..out.find("\nTotals").unwrap()].to_string()
        };
        assert_eq!(
            entry(&max),
            format!(
                "{{ prev_pid:          7 }} hitcount:          4\n\tmax:         30  prev_comm: {:<32}  ip:       4112\n",
                "second"
            )
        );
        assert_eq!(
            entry(&change),
            format!("{{ prev_pid:          7 }} hitcount:          4\n\tchanged:         20  prev_comm: {:<32}\n", "third")
        );
    }

    #[test]
    fn variables_and_actions_name_their_histogram() {
        let line = "keys=prev_pid:vals=bytes:a=bytes,b=prev_pid+1:onmatch(g.e).s($a,$b):sort=bytes";
        let with = spec(line);
        assert_eq!(
            with.line(),
            "hist:keys=prev_pid:vals=hitcount,bytes:a=bytes,b=prev_pid+1:sort=bytes:size=2048:onmatch(g.e).s($a,$b)"
        );
        assert!(with.same_as(&spec(&with.line()["hist:".len()..])), "its line names it");
        assert!(!with.same_as(&spec("keys=prev_pid:vals=bytes:sort=bytes")), "the variables count");
        let error = |text: &str| parse(text, &fields()).unwrap_err();
        assert_eq!(error("keys=ip:x=nosuch"), HistError::Expr(ExprError::BadOperand("nosuch".into())));
        assert_eq!(spec("keys=ip:onmatch(g.e).s($y)").vars().refs.len(), 1, "a read of another histogram's");
        assert_eq!(
            spec("keys=ip:clock=local").line(),
            "hist:keys=ip:vals=hitcount:sort=hitcount:size=2048",
            "no timestamp: no clock"
        );
        assert_eq!(spec("keys=ip:t=common_timestamp:clock=counter").clock(), Some("counter"));
        assert_eq!(error("keys=ip:clock="), HistError::Unknown("clock=".into()));
    }

    #[test]
    fn a_full_table_drops_and_counts() {
        let histogram = Histogram::try_new(spec("keys=bytes:size=128")).unwrap();
        for bytes in 0..200 {
            hit(&histogram, 1, b"", bytes);
        }
        hit(&histogram, 1, b"", 5); // a key already there still counts
        let (hits, drops) = histogram.map.totals();
        assert_eq!((hits, drops), (129, 72));
        assert!(output(&histogram).ends_with("Hits: 129\n    Entries: 128\n    Dropped: 72\n"));
    }

    #[test]
    fn concurrent_hits_are_all_counted() {
        let histogram = std::sync::Arc::new(Histogram::try_new(spec("keys=bytes:vals=prev_pid")).unwrap());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let histogram = histogram.clone();
                std::thread::spawn(move || {
                    for n in 0..20_000u64 {
                        hit(&histogram, 1, b"", n % 100);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|thread| thread.join().unwrap());
        // A host thread can be preempted between claiming a slot and
        // publishing its key (the kernel's hit path cannot: interrupts are
        // masked), and another then drops its hit after waiting: every hit
        // is counted once or dropped once, and no key is in two entries.
        let entries = histogram.map.entries();
        let (hits, drops) = histogram.map.totals();
        assert_eq!(hits + drops, 80_000);
        assert_eq!(entries.iter().map(|(_, sums)| sums[0]).sum::<u64>(), hits);
        assert!(entries.iter().all(|(_, sums)| sums[0] == sums[1]), "the sums add up with the counts");
        let mut keys: Vec<u64> = entries.iter().map(|(key, _)| key[0]).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), entries.len(), "each key once");
    }

    #[test]
    fn tables_together_stay_within_their_budget() {
        // One string key in 32768 entries: about 9 MiB; three at the
        // largest size: over the budget whole.
        let big = spec("keys=prev_comm,prev_comm,prev_comm:size=131072");
        assert_eq!(Histogram::try_new(big).map(drop), Err(HistError::NoMemory));
        let large = spec("keys=prev_comm:size=32768");
        let first = Histogram::try_new(large.clone()).unwrap();
        assert_eq!(Histogram::try_new(large.clone()).map(drop), Err(HistError::NoMemory), "two would pass the budget");
        drop(first);
        assert!(Histogram::try_new(large).is_ok(), "a freed table gives its bytes back");
    }
}
