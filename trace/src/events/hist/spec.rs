//! A `hist:` line parsed: its keys, values, sort keys, size, variables
//! and actions ([`HistSpec`]), or why it was refused ([`HistError`]), in
//! Linux's words where Linux has them. Pure: unit tested on the host.

use super::{DEFAULT_SIZE, MAX_KEYS, MAX_SIZE, MAX_VALS, MIN_SIZE, STACK_KEY_WORDS, STRING_KEY_WORDS, TABLES_BUDGET};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use crate::events::filter::{FieldKind, FilterField, Source};
use crate::events::hist::expr::{Expr, ExprError, Vars};

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
    pub(super) fn from_name(name: &str) -> Option<Modifier> {
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
    pub(super) name: String,
    /// What the hit path reads: a field of the event, or a generic one.
    pub(super) source: Source,
    pub(super) kind: FieldKind,
    pub(super) modifier: Modifier,
    /// A value column that counts hits (`hitcount.percent`,
    /// `hitcount.graph`): each hit adds 1, whatever `source` says.
    pub(super) counts_hits: bool,
    /// A value that is an expression (`vals=a-b`, `vals=$x`), worked out
    /// at each hit; its name is its text.
    pub(super) expr: Option<Expr>,
}

impl HistField {
    /// Words it takes in a key.
    pub(super) fn key_words(&self) -> usize {
        match (self.source, self.kind) {
            (Source::Stack, _) => STACK_KEY_WORDS,
            (_, FieldKind::String) => STRING_KEY_WORDS,
            _ => 1,
        }
    }

    pub(super) fn spec(&self) -> String {
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
    pub(super) keys: Vec<HistField>,
    pub(super) vals: Vec<HistField>,
    pub(super) sort: Vec<SortKey>,
    pub(super) size: usize,
    /// Its variables, the reads of other histograms' and its actions
    /// (`crate::events::hist::expr`).
    pub(super) vars: Vars,
    /// The trace clock its timestamps need (`clock=`; Linux's default,
    /// `global`): adding it switches its trace array to that clock, as
    /// Linux does.
    pub(super) clock: String,
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
pub(super) fn field(text: &str, fields: &[FilterField]) -> Result<HistField, HistError> {
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
pub(super) fn is_expression(text: &str) -> bool {
    let body = match text.rsplit_once('.') {
        Some((body, name)) if Modifier::from_name(name).is_some() => body,
        _ => text,
    };
    body.starts_with('$') || body.contains(['+', '-', '*', '/'])
}

/// A key: a field (`NAME[.MODIFIER]`), or an expression of fields and
/// constants, with a number's modifier after it (`n*2.log2`). A key
/// cannot read another trigger's variable: variables are read by key.
pub(super) fn key_field(text: &str, fields: &[FilterField], vars: &mut Vars) -> Result<HistField, HistError> {
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
pub(super) fn val_field(text: &str, fields: &[FilterField], vars: &mut Vars) -> Result<HistField, HistError> {
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

pub(super) fn sort_key(text: &str, keys: &[HistField], vals: &[HistField]) -> Result<SortKey, HistError> {
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
pub(super) fn parse_size(text: &str) -> Result<usize, HistError> {
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

    pub(super) fn key_words(&self) -> usize {
        self.keys.iter().map(HistField::key_words).sum()
    }
}
