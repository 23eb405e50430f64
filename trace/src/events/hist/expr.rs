//! The inter-event parts of a `hist` trigger, as Linux's: variables,
//! their expressions, and `onmatch()` actions that record a synthetic
//! event.
//!
//! ```text
//! echo 'hist:keys=pid:ts0=common_timestamp.usecs' >> events/sched/sched_wakeup/trigger
//! echo 'hist:keys=next_pid:lat=common_timestamp.usecs-$ts0:onmatch(sched.sched_wakeup).wakeup_latency($lat,next_pid)' \
//!     >> events/sched/sched_switch/trigger
//! ```
//!
//! A variable (`NAME=EXPR`) is kept per histogram entry: each hit that
//! lands in an entry sets it. An expression is operands joined by at most
//! three of `+`, `-`, `*` and `/` (on 64 bits, wrapping; `*` and `/` first,
//! then left to right, as Linux works it out; a division by the constant 0
//! is refused, by a value of 0 gives all ones, Linux's -1; every operand in
//! the units of `common_timestamp.usecs`, or none, as Linux checks): an
//! event field, `common_timestamp` (the
//! trace clock's reading; `.usecs` divides a nanosecond clock into
//! microseconds), a decimal constant, or `$NAME`, another histogram's
//! variable. A `$NAME` is read in the entry of the *other* histogram whose
//! key is this hit's key (the keys must have the same shape); in an
//! expression with an operator it is read once (Linux's `read_once`: the
//! variable is unset by the read, so one wakeup gives one latency). A hit
//! whose `$NAME` has no value (no such entry, or unset) counts nothing and
//! acts on nothing, as in Linux.
//!
//! `onmatch(GRP.EVENT).SYNTH(PARAMS)` (or `.trace(SYNTH,PARAMS)`) records
//! the synthetic event SYNTH on every hit whose variables were all found,
//! its fields taken from PARAMS: this histogram's variables (`$lat`),
//! variables read from another one, or this event's fields. `GRP.EVENT`
//! names the event whose histogram defines the variables read; a `$NAME`
//! is looked for there first.
//!
//! `onmax($VAR).save(FIELD,...)` keeps, in each entry, the largest value
//! its variable took and the fields of the hit that set it
//! (`onchange($VAR)`: the last value it changed to), in words after the
//! variables; `cat hist` prints them under the entry. `onmax($VAR).SYNTH(PARAMS)`
//! (or `.trace(SYNTH,PARAMS)`) records the synthetic event at each such
//! change instead, as `onmatch` does at each hit. `onmax($VAR).snapshot()`
//! keeps the value the same way and, when it is the largest of every entry
//! so far (`onchange`: a change from the last snapshot's), takes a snapshot
//! of the trace array (Linux's conditional snapshot): the trace that led to
//! the worst case stays in `snapshot`.
//!
//! This module parses and prints those parts and evaluates them on a hit;
//! resolving the names (which histogram, which synthetic event) is the
//! kernel side's, when the trigger is added ([`crate::events::hist::Histogram::resolve`]).

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use crate::events::filter::{FieldKind, FieldValue, FilterField, Source};

/// The most variables a histogram defines (Linux's `TRACING_MAP_VARS_MAX`).
pub const MAX_VARS: usize = 16;
/// The most `$NAME` reads of other histograms' variables one trigger makes.
pub const MAX_REFS: usize = 16;
/// The most actions a trigger has (Linux's `HIST_ACTIONS_MAX`).
pub const MAX_ACTIONS: usize = 8;
/// The most parameters of an action (a synthetic event's fields).
pub const MAX_PARAMS: usize = 16;
/// The most operators in one expression (Linux's three subexpressions).
pub const MAX_OPERATORS: usize = 3;
/// The most words an entry keeps for variables and tracked values (one
/// set bit each in a word).
pub const MAX_ENTRY_WORDS: usize = 64;

/// Why a variable or an action was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExprError {
    /// `NAME=EXPR` with a bad name or an empty expression.
    BadAssignment(String),
    DuplicateVar(String),
    TooManyVars,
    /// More `$NAME`s read than [`MAX_REFS`].
    TooManyRefs,
    /// `onmax($NAME)` or `onchange($NAME)` of no variable of this trigger.
    NotOwnVar(String),
    /// An operand that is no field, timestamp, constant or `$NAME`.
    BadOperand(String),
    /// A string field in an expression.
    NotANumber(String),
    /// A malformed `onmatch(...)`.
    BadAction(String),
    /// More than [`MAX_OPERATORS`] operators in one expression (Linux's
    /// "Too many subexpressions").
    TooManyOperators(String),
    /// A division by the constant 0 (Linux's "Division by zero").
    DivisionByZero(String),
    /// `common_timestamp.usecs` (or a variable that holds it) with an
    /// operand in other units (Linux's "Timestamp units in expression
    /// don't match").
    TimestampMismatch(String),
    /// A second `.snapshot()` action in one trigger (Linux allows one
    /// conditional snapshot per trace array).
    SecondSnapshot,
    TooManyActions,
    TooManyParams,
}

impl fmt::Display for ExprError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExprError::BadAssignment(text) => write!(f, "hist: malformed assignment '{text}' (NAME=EXPR)"),
            ExprError::DuplicateVar(name) => write!(f, "hist: variable '{name}' already defined"),
            ExprError::TooManyVars => write!(f, "hist: at most {MAX_VARS} variables"),
            ExprError::TooManyRefs => write!(f, "hist: at most {MAX_REFS} variables of other histograms read"),
            ExprError::NotOwnVar(name) => {
                write!(f, "hist: for onmax(x) or onchange(x), x must be a variable of this trigger, not '{name}'")
            }
            ExprError::BadOperand(text) => {
                write!(f, "hist: '{text}' is no field, common_timestamp[.usecs], number or $variable")
            }
            ExprError::NotANumber(name) => write!(f, "hist: '{name}' is a string: expressions take numbers"),
            ExprError::BadAction(text) => {
                write!(
                    f,
                    "hist: malformed action '{text}' (onmatch(GRP.EVENT), onmax($VAR) or onchange($VAR), then .SYNTH(PARAMS) or .trace(SYNTH,PARAMS); .save(FIELDS) or .snapshot() after onmax or onchange)"
                )
            }
            ExprError::TooManyActions => write!(f, "hist: at most {MAX_ACTIONS} actions"),
            ExprError::TooManyOperators(text) => {
                write!(f, "hist: too many subexpressions ({MAX_OPERATORS} operators at most) in '{text}'")
            }
            ExprError::DivisionByZero(text) => write!(f, "hist: division by zero in '{text}'"),
            ExprError::TimestampMismatch(text) => {
                write!(f, "hist: timestamp units in expression don't match in '{text}' (common_timestamp.usecs with other units)")
            }
            ExprError::SecondSnapshot => write!(f, "hist: one .snapshot() action per trigger"),
            ExprError::TooManyParams => write!(f, "hist: at most {MAX_PARAMS} parameters"),
        }
    }
}

/// One operand of an expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operand {
    /// A number field of the event (or a generic one, `common_cpu`).
    Field {
        name: String,
        source: Source,
    },
    /// `common_timestamp`: the trace clock; `.usecs`: in microseconds.
    Timestamp {
        usecs: bool,
    },
    /// `$NAME`, another histogram's variable: its place among the reads
    /// the trigger makes ([`Vars::refs`]).
    Var {
        name: String,
        read: usize,
    },
    Const(u64),
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Field { name, .. } => f.write_str(name),
            Operand::Timestamp { usecs: false } => f.write_str("common_timestamp"),
            Operand::Timestamp { usecs: true } => f.write_str("common_timestamp.usecs"),
            Operand::Var { name, .. } => write!(f, "${name}"),
            Operand::Const(value) => write!(f, "{value}"),
        }
    }
}

/// An operator between two operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Plus,
    Minus,
    Mul,
    Div,
}

impl Op {
    fn of(c: char) -> Option<Op> {
        Some(match c {
            '+' => Op::Plus,
            '-' => Op::Minus,
            '*' => Op::Mul,
            '/' => Op::Div,
            _ => return None,
        })
    }

    fn symbol(self) -> &'static str {
        match self {
            Op::Plus => "+",
            Op::Minus => "-",
            Op::Mul => "*",
            Op::Div => "/",
        }
    }

    /// `left OP right`, on 64 bits.
    fn apply(self, left: u64, right: u64) -> u64 {
        match self {
            Op::Plus => left.wrapping_add(right),
            Op::Minus => left.wrapping_sub(right),
            Op::Mul => left.wrapping_mul(right),
            // Linux's `div_by_zero()`: -1.
            Op::Div => left.checked_div(right).unwrap_or(u64::MAX),
        }
    }
}

/// Operands joined by operators: `*` and `/` first, then `+` and `-`, each
/// left to right.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expr {
    first: Operand,
    rest: Vec<(Op, Operand)>,
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.first)?;
        for (op, operand) in &self.rest {
            write!(f, "{}{operand}", op.symbol())?;
        }
        Ok(())
    }
}

/// What a hit's expressions read: the event's fields, the clock, and the
/// values of the `$NAME`s read for it.
pub struct HitValues<'h, 'a> {
    pub field: &'h dyn Fn(usize) -> FieldValue<'a>,
    pub now: &'h dyn Fn() -> u64,
    pub refs: &'h [u64],
}

impl Operand {
    /// Whether it is in `common_timestamp.usecs`'s units, if that is known
    /// without resolving a `$NAME` (`None`).
    fn usecs(&self) -> Option<bool> {
        match self {
            Operand::Timestamp { usecs } => Some(*usecs),
            Operand::Var { .. } => None,
            Operand::Field { .. } | Operand::Const(_) => Some(false),
        }
    }

    fn value(&self, hit: &HitValues) -> u64 {
        match self {
            Operand::Field { source, .. } => match source.read(hit.field) {
                FieldValue::Unsigned(value) => value,
                FieldValue::Signed(value) => value as u64,
                FieldValue::Str(_) | FieldValue::Missing => 0,
            },
            Operand::Timestamp { usecs: false } => (hit.now)(),
            Operand::Timestamp { usecs: true } => (hit.now)() / 1000,
            Operand::Var { read, .. } => hit.refs.get(*read).copied().unwrap_or(0),
            Operand::Const(value) => *value,
        }
    }
}

impl Expr {
    /// Its value in a hit.
    pub fn value(&self, hit: &HitValues) -> u64 {
        // A sum of products: `term` is the product being worked out, to
        // be added to (or taken from, as `pending` says) the sum.
        let (mut sum, mut pending, mut term) = (0u64, Op::Plus, self.first.value(hit));
        for (op, operand) in &self.rest {
            let value = operand.value(hit);
            match op {
                Op::Mul | Op::Div => term = op.apply(term, value),
                Op::Plus | Op::Minus => {
                    sum = pending.apply(sum, term);
                    (pending, term) = (*op, value);
                }
            }
        }
        pending.apply(sum, term)
    }

    /// Its operands, in order.
    pub fn operands(&self) -> impl Iterator<Item = &Operand> {
        core::iter::once(&self.first).chain(self.rest.iter().map(|(_, operand)| operand))
    }

    /// Whether its value is in `common_timestamp.usecs`'s units, as Linux
    /// carries them: its first operand's (`var_usecs` says a `$NAME`'s:
    /// its read's place among the trigger's reads).
    pub fn usecs(&self, var_usecs: &dyn Fn(usize) -> bool) -> bool {
        match &self.first {
            Operand::Var { read, .. } => var_usecs(*read),
            first => first.usecs().unwrap_or(false),
        }
    }

    /// Checks that its operands agree on `common_timestamp.usecs`'s units
    /// (`var_usecs` as for [`usecs`](Self::usecs), or `None` to check
    /// only the operands known without it).
    pub fn check_units(&self, var_usecs: Option<&dyn Fn(usize) -> bool>) -> Result<(), ExprError> {
        let units = self.operands().filter_map(|operand| match (operand, var_usecs) {
            (Operand::Var { read, .. }, Some(var_usecs)) => Some(var_usecs(*read)),
            (operand, _) => operand.usecs(),
        });
        let units: Vec<bool> = units.collect();
        match units.windows(2).any(|pair| pair[0] != pair[1]) {
            true => Err(ExprError::TimestampMismatch(self.to_string())),
            false => Ok(()),
        }
    }

    /// Whether it reads the clock (the hit then reads it once).
    pub fn uses_timestamp(&self) -> bool {
        self.operands().any(|o| matches!(o, Operand::Timestamp { .. }))
    }
}

/// `NAME=EXPR`: a variable each hit sets in its entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VarDef {
    pub name: String,
    pub expr: Expr,
}

/// A `$NAME` the trigger reads from another histogram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VarRead {
    pub name: String,
    /// Read once (an operand of an expression with an operator): the read
    /// unsets it.
    pub once: bool,
}

/// Where an action's parameter comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Param {
    /// This trigger's variable N, as this hit set it.
    Own { name: String, var: usize },
    /// The `$NAME` read N of this hit.
    Read { name: String, read: usize },
    /// A field of the event.
    Field { name: String, source: Source, kind: FieldKind },
}

impl fmt::Display for Param {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Param::Own { name, .. } | Param::Read { name, .. } => write!(f, "${name}"),
            Param::Field { name, .. } => f.write_str(name),
        }
    }
}

impl Param {
    /// Whether it is a string (a synthetic event's string field takes it).
    pub fn is_string(&self) -> bool {
        matches!(self, Param::Field { kind: FieldKind::String, .. })
    }
}

/// The action that records a synthetic event: `SYNTH(PARAMS)` or
/// `trace(SYNTH,PARAMS)`, after `onmatch()`, `onmax()` or `onchange()`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SynthCall {
    pub synth: String,
    pub params: Vec<Param>,
    /// Written with `trace(...)` (shown back so).
    pub trace_keyword: bool,
}

impl fmt::Display for SynthCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.trace_keyword {
            true => write!(f, "trace({}", self.synth)?,
            false => write!(f, "{}(", self.synth)?,
        }
        for (n, param) in self.params.iter().enumerate() {
            if n > 0 || self.trace_keyword {
                f.write_str(",")?;
            }
            write!(f, "{param}")?;
        }
        f.write_str(")")
    }
}

impl SynthCall {
    /// `SYNTH(PARAMS)` or `trace(SYNTH,PARAMS)` (`text`, part of the
    /// action `action`). Its `$NAME`s are placed by [`Vars::finish`].
    fn parse(text: &str, action: &str, fields: &[FilterField]) -> Result<SynthCall, ExprError> {
        let bad = || ExprError::BadAction(action.to_string());
        let (call, params) = text.strip_suffix(')').and_then(|rest| rest.split_once('(')).ok_or_else(bad)?;
        let mut params: Vec<&str> = if params.is_empty() { Vec::new() } else { params.split(',').collect() };
        let trace_keyword = call == "trace";
        let synth = match trace_keyword {
            true if !params.is_empty() => params.remove(0),
            true => return Err(bad()),
            false => call,
        };
        if synth.is_empty() || synth.contains(char::is_whitespace) {
            return Err(bad());
        }
        if params.len() > MAX_PARAMS {
            return Err(ExprError::TooManyParams);
        }
        let params = params
            .into_iter()
            .map(|param| match param.strip_prefix('$') {
                // Placed by `finish`.
                Some(name) if is_identifier(name) => Ok(Param::Own { name: name.to_string(), var: usize::MAX }),
                Some(_) => Err(ExprError::BadOperand(param.to_string())),
                None => {
                    let (source, kind) =
                        Source::find_common(param, fields).ok_or_else(|| ExprError::BadOperand(param.to_string()))?;
                    Ok(Param::Field { name: param.to_string(), source, kind })
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SynthCall { synth: synth.to_string(), params, trace_keyword })
    }
}

/// `onmatch(GRP.EVENT).SYNTH(PARAMS)` or `onmatch(GRP.EVENT).trace(SYNTH,PARAMS)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OnMatch {
    pub group: String,
    pub event: String,
    pub call: SynthCall,
    /// Its place among the trigger's actions as written (the line shows
    /// them in that order).
    pub written: usize,
}

impl fmt::Display for OnMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "onmatch({}.{}).{}", self.group, self.event, self.call)
    }
}

/// What `onmax()` and `onchange()` keep track of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handler {
    /// `onmax($VAR)`: the largest value the variable took in an entry.
    Max,
    /// `onchange($VAR)`: the last value it changed to.
    Change,
}

/// A field `save()` keeps with the tracked value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Saved {
    pub name: String,
    pub source: Source,
    /// A string (kept up to [`SAVED_STRING_WORDS`] words).
    pub string: bool,
    /// Its first word among the entry's words.
    pub at: usize,
}

/// The words a saved string keeps (32 bytes: a task name fits whole).
pub const SAVED_STRING_WORDS: usize = 4;

/// What `onmax()` or `onchange()` does when an entry's value changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TrackAction {
    /// `.save(FIELD,...)`: keeps the fields of the hit that set it.
    Save(Vec<Saved>),
    /// `.snapshot()`: a value past every entry's takes a snapshot.
    Snapshot,
    /// `.SYNTH(PARAMS)` or `.trace(SYNTH,PARAMS)`: records the synthetic
    /// event.
    Trace(SynthCall),
}

/// `onmax($VAR).ACTION` or `onchange($VAR).ACTION`: per entry, the tracked
/// value, and what a change of it does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Track {
    pub handler: Handler,
    pub action: TrackAction,
    pub var_name: String,
    /// The variable's index (this trigger's).
    pub var: usize,
    /// The tracked value's word among the entry's words (after the
    /// variables).
    pub at: usize,
    /// Its place among the trigger's actions as written.
    pub written: usize,
}

impl Track {
    /// Whether it takes snapshots.
    pub fn is_snapshot(&self) -> bool {
        self.action == TrackAction::Snapshot
    }

    /// The fields it saves (none but for `.save()`).
    pub fn saves(&self) -> &[Saved] {
        match &self.action {
            TrackAction::Save(saves) => saves,
            _ => &[],
        }
    }
}

impl fmt::Display for Track {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let handler = if self.handler == Handler::Max { "onmax" } else { "onchange" };
        write!(f, "{handler}(${}).", self.var_name)?;
        match &self.action {
            TrackAction::Save(saves) => {
                let names: Vec<&str> = saves.iter().map(|saved| saved.name.as_str()).collect();
                write!(f, "save({})", names.join(","))
            }
            TrackAction::Snapshot => f.write_str("snapshot()"),
            TrackAction::Trace(call) => write!(f, "{call}"),
        }
    }
}

/// A trigger's variables, the reads of other histograms' variables, and
/// its actions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Vars {
    pub defs: Vec<VarDef>,
    pub refs: Vec<VarRead>,
    pub actions: Vec<OnMatch>,
    pub tracks: Vec<Track>,
}

/// Whether `name` can name a variable.
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Vars {
    /// Whether the trigger has none of these parts.
    pub fn is_empty(&self) -> bool {
        self.defs.is_empty() && self.actions.is_empty() && self.refs.is_empty()
    }

    /// The words an entry keeps: the variables, then each track's value
    /// and saved fields.
    pub fn entry_words(&self) -> usize {
        self.tracks.last().map_or(self.defs.len(), |track| {
            track.saves().last().map_or(track.at + 1, |saved| saved.at + if saved.string { SAVED_STRING_WORDS } else { 1 })
        })
    }

    /// Adds `onmax($VAR).save(FIELD,...)`, `.snapshot()`, `.SYNTH(PARAMS)`
    /// or `.trace(SYNTH,PARAMS)`, or `onchange(...)` the same (its
    /// variable placed by [`finish`](Self::finish)).
    pub fn add_track(&mut self, text: &str, fields: &[FilterField]) -> Result<(), ExprError> {
        let bad = || ExprError::BadAction(text.to_string());
        let (handler, rest) = match (text.strip_prefix("onmax("), text.strip_prefix("onchange(")) {
            (Some(rest), _) => (Handler::Max, rest),
            (_, Some(rest)) => (Handler::Change, rest),
            _ => return Err(bad()),
        };
        let (var, rest) = rest.split_once(").").ok_or_else(bad)?;
        let var = var.strip_prefix('$').filter(|name| is_identifier(name)).ok_or_else(bad)?;
        if self.actions.len() + self.tracks.len() == MAX_ACTIONS {
            return Err(ExprError::TooManyActions);
        }
        let action = match rest.strip_prefix("save(").and_then(|rest| rest.strip_suffix(')')) {
            Some(saves) => TrackAction::Save(Self::saves(saves, fields)?),
            // `snapshot()` takes no parameters (nor is a synthetic event).
            None if rest.starts_with("snapshot(") => {
                if rest != "snapshot()" {
                    return Err(bad());
                }
                if self.tracks.iter().any(Track::is_snapshot) {
                    return Err(ExprError::SecondSnapshot);
                }
                TrackAction::Snapshot
            }
            None => TrackAction::Trace(SynthCall::parse(rest, text, fields)?),
        };
        let written = self.actions.len() + self.tracks.len();
        self.tracks.push(Track { handler, action, var_name: var.to_string(), var: usize::MAX, at: 0, written });
        Ok(())
    }

    /// The fields `save(FIELD,...)` names.
    fn saves(text: &str, fields: &[FilterField]) -> Result<Vec<Saved>, ExprError> {
        let saves = text
            .split(',')
            .filter(|name| !name.is_empty())
            .map(|name| {
                let (source, kind) = Source::find_common(name, fields).ok_or_else(|| ExprError::BadOperand(name.to_string()))?;
                let string = match kind {
                    FieldKind::String => true,
                    FieldKind::Signed | FieldKind::Unsigned => false,
                    _ => return Err(ExprError::BadOperand(name.to_string())),
                };
                Ok(Saved { name: name.to_string(), source, string, at: 0 })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if saves.len() > MAX_PARAMS {
            return Err(ExprError::TooManyParams);
        }
        Ok(saves)
    }

    /// Whether any expression reads the clock.
    pub fn uses_timestamp(&self) -> bool {
        self.defs.iter().any(|def| def.expr.uses_timestamp())
    }

    /// The index of this trigger's variable `name`.
    pub fn own(&self, name: &str) -> Option<usize> {
        self.defs.iter().position(|def| def.name == name)
    }

    /// Adds `NAME=EXPR[,NAME=EXPR...]` (one attribute of the line).
    pub fn add_assignments(&mut self, text: &str, fields: &[FilterField]) -> Result<(), ExprError> {
        for assignment in text.split(',') {
            let (name, expr) = assignment.split_once('=').ok_or_else(|| ExprError::BadAssignment(assignment.to_string()))?;
            if !is_identifier(name) || expr.is_empty() {
                return Err(ExprError::BadAssignment(assignment.to_string()));
            }
            if self.own(name).is_some() {
                return Err(ExprError::DuplicateVar(name.to_string()));
            }
            if self.defs.len() == MAX_VARS {
                return Err(ExprError::TooManyVars);
            }
            let expr = self.expression(expr, fields)?;
            self.defs.push(VarDef { name: name.to_string(), expr });
        }
        Ok(())
    }

    /// Parses an expression: operands joined by operators.
    /// A `hist` value that is an expression (`vals=bytes_alloc-bytes_req`,
    /// `vals=$lat`): parsed as a variable's, its `$NAME`s read from other
    /// histograms.
    pub fn value_expression(&mut self, text: &str, fields: &[FilterField]) -> Result<Expr, ExprError> {
        self.expression(text, fields)
    }

    fn expression(&mut self, text: &str, fields: &[FilterField]) -> Result<Expr, ExprError> {
        let mut parts = Vec::new();
        let mut start = 0;
        let mut op = None;
        for (at, c) in text.char_indices() {
            if let Some(next) = Op::of(c) {
                parts.push((op, &text[start..at]));
                op = Some(next);
                start = at + 1;
            }
        }
        parts.push((op, &text[start..]));
        if parts.len() > MAX_OPERATORS + 1 {
            return Err(ExprError::TooManyOperators(text.to_string()));
        }
        if parts.iter().any(|&(op, operand)| op == Some(Op::Div) && operand.bytes().all(|b| b == b'0') && !operand.is_empty()) {
            return Err(ExprError::DivisionByZero(text.to_string()));
        }
        // An operand read from another histogram in an expression with
        // an operator is read once, as Linux's `read_once`.
        let once = parts.len() > 1;
        let mut operands = parts.into_iter().map(|(op, text)| Ok((op, self.operand(text, fields, once)?)));
        let (_, first) = operands.next().expect("one part at least")?;
        let rest = operands.map(|part: Result<_, ExprError>| part.map(|(op, operand)| (op.unwrap_or(Op::Plus), operand)));
        let expr = Expr { first, rest: rest.collect::<Result<_, _>>()? };
        expr.check_units(None)?;
        Ok(expr)
    }

    fn operand(&mut self, text: &str, fields: &[FilterField], once: bool) -> Result<Operand, ExprError> {
        let bad = || ExprError::BadOperand(text.to_string());
        if let Some(name) = text.strip_prefix('$') {
            if !is_identifier(name) {
                return Err(bad());
            }
            return Ok(Operand::Var { name: name.to_string(), read: self.read(name, once)? });
        }
        if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
            return text.parse().map(Operand::Const).map_err(|_| bad());
        }
        match text {
            "common_timestamp" => return Ok(Operand::Timestamp { usecs: false }),
            "common_timestamp.usecs" => return Ok(Operand::Timestamp { usecs: true }),
            _ => {}
        }
        let (source, kind) = Source::find_common(text, fields).ok_or_else(bad)?;
        match kind {
            FieldKind::Signed | FieldKind::Unsigned => Ok(Operand::Field { name: text.to_string(), source }),
            _ => Err(ExprError::NotANumber(text.to_string())),
        }
    }

    /// The place of the read of `$name` (made once if any use asks).
    fn read(&mut self, name: &str, once: bool) -> Result<usize, ExprError> {
        if let Some(at) = self.refs.iter().position(|read| read.name == name) {
            self.refs[at].once |= once;
            return Ok(at);
        }
        if self.refs.len() == MAX_REFS {
            return Err(ExprError::TooManyRefs);
        }
        self.refs.push(VarRead { name: name.to_string(), once });
        Ok(self.refs.len() - 1)
    }

    /// Adds `onmatch(GRP.EVENT).SYNTH(PARAMS)` or `...trace(SYNTH,PARAMS)`.
    /// Its `$NAME` parameters are this trigger's variables (defined before
    /// or after it on the line) or reads its expressions make: resolved by
    /// [`finish`](Self::finish), once the whole line is read.
    pub fn add_action(&mut self, text: &str, fields: &[FilterField]) -> Result<(), ExprError> {
        let bad = || ExprError::BadAction(text.to_string());
        let rest = text.strip_prefix("onmatch(").ok_or_else(bad)?;
        let (event, rest) = rest.split_once(").").ok_or_else(bad)?;
        let (group, event) = event.split_once('.').ok_or_else(bad)?;
        if [group, event].iter().any(|name| name.is_empty() || name.contains(char::is_whitespace)) {
            return Err(bad());
        }
        let call = SynthCall::parse(rest, text, fields)?;
        if self.actions.len() + self.tracks.len() == MAX_ACTIONS {
            return Err(ExprError::TooManyActions);
        }
        let written = self.actions.len() + self.tracks.len();
        self.actions.push(OnMatch { group: group.to_string(), event: event.to_string(), call, written });
        Ok(())
    }

    /// Places each `$NAME` parameter: this trigger's variable, or else a
    /// read of another histogram's (the one its expressions make, or a
    /// new one, not read once: Linux looks for it in the `onmatch` event's
    /// histogram first).
    pub fn finish(&mut self) -> Result<(), ExprError> {
        for at in 0..self.actions.len() {
            let params = core::mem::take(&mut self.actions[at].call.params);
            self.actions[at].call.params = self.place(params)?;
        }
        for at in 0..self.tracks.len() {
            if let TrackAction::Trace(call) = &mut self.tracks[at].action {
                let params = core::mem::take(&mut call.params);
                let placed = self.place(params)?;
                if let TrackAction::Trace(call) = &mut self.tracks[at].action {
                    call.params = placed;
                }
            }
        }
        // Each track's variable is this trigger's (Linux: `ONX_NOT_VAR`);
        // its words follow the variables.
        let mut at = self.defs.len();
        for n in 0..self.tracks.len() {
            let var = self.own(&self.tracks[n].var_name).ok_or_else(|| ExprError::NotOwnVar(self.tracks[n].var_name.clone()))?;
            let track = &mut self.tracks[n];
            track.var = var;
            track.at = at;
            at += 1;
            if let TrackAction::Save(saves) = &mut track.action {
                for saved in saves {
                    saved.at = at;
                    at += if saved.string { SAVED_STRING_WORDS } else { 1 };
                }
            }
        }
        if at > MAX_ENTRY_WORDS {
            return Err(ExprError::TooManyVars);
        }
        Ok(())
    }

    /// `params` with each `$NAME` placed: this trigger's variable, or else
    /// a read of another histogram's.
    fn place(&mut self, params: Vec<Param>) -> Result<Vec<Param>, ExprError> {
        params
            .into_iter()
            .map(|param| match param {
                Param::Own { name, .. } => match self.own(&name) {
                    Some(var) => Ok(Param::Own { name, var }),
                    None => self.read(&name, false).map(|read| Param::Read { name, read }),
                },
                other => Ok(other),
            })
            .collect()
    }

    /// Every action that records a synthetic event: the `onmatch()` ones,
    /// then the tracks' (in that order, which `Histogram::resolve` keeps).
    pub fn calls(&self) -> impl Iterator<Item = &SynthCall> {
        let tracks = self.tracks.iter().filter_map(|track| match &track.action {
            TrackAction::Trace(call) => Some(call),
            _ => None,
        });
        self.actions.iter().map(|action| &action.call).chain(tracks)
    }

    /// What the line shows of them after `vals=` (`:ts0=common_timestamp.usecs`)
    /// and at its end (`:onmatch(...)...`), as Linux prints them.
    pub fn defs_text(&self) -> String {
        let defs: Vec<String> = self.defs.iter().map(|def| alloc::format!("{}={}", def.name, def.expr)).collect();
        if defs.is_empty() {
            String::new()
        } else {
            alloc::format!(":{}", defs.join(","))
        }
    }

    /// The actions, each after a `:`, in the order they were written (a
    /// hit runs the `onmatch()` ones first, then the others, each in that
    /// order).
    pub fn actions_text(&self) -> String {
        let matches = self.actions.iter().map(|action| (action.written, alloc::format!(":{action}")));
        let mut all: Vec<(usize, String)> =
            matches.chain(self.tracks.iter().map(|track| (track.written, alloc::format!(":{track}")))).collect();
        all.sort_by_key(|(written, _)| *written);
        all.into_iter().map(|(_, text)| text).collect()
    }

    /// The values of an action's parameters in a hit: `vars` this
    /// trigger's variables as set, `refs` the reads, `field` the event's.
    pub fn params<'a>(
        action: &SynthCall,
        vars: &[u64],
        refs: &[u64],
        field: &dyn Fn(usize) -> FieldValue<'a>,
        out: &mut [FieldValue<'a>; MAX_PARAMS],
    ) -> usize {
        for (slot, param) in out.iter_mut().zip(&action.params) {
            *slot = match param {
                Param::Own { var, .. } => FieldValue::Unsigned(vars.get(*var).copied().unwrap_or(0)),
                Param::Read { read, .. } => FieldValue::Unsigned(refs.get(*read).copied().unwrap_or(0)),
                Param::Field { source, .. } => source.read(field),
            };
        }
        action.params.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields() -> Vec<FilterField> {
        alloc::vec![
            FilterField::new("common_pid", FieldKind::Signed),
            FilterField::new("next_pid", FieldKind::Signed),
            FilterField::new("next_comm", FieldKind::String),
        ]
    }

    #[test]
    fn assignments_and_actions_read_back_as_written() {
        let mut vars = Vars::default();
        vars.add_assignments("lat=common_timestamp.usecs-$ts0,c=next_pid+2", &fields()).unwrap();
        vars.add_action("onmatch(sched.sched_wakeup).wakeup_latency($lat,next_pid,$ts0,next_comm)", &fields()).unwrap();
        vars.add_action("onmatch(sched.sched_wakeup).trace(wakeup_latency,$c)", &fields()).unwrap();
        vars.finish().unwrap();
        assert_eq!(vars.defs_text(), ":lat=common_timestamp.usecs-$ts0,c=next_pid+2");
        assert_eq!(
            vars.actions_text(),
            ":onmatch(sched.sched_wakeup).wakeup_latency($lat,next_pid,$ts0,next_comm):onmatch(sched.sched_wakeup).trace(wakeup_latency,$c)"
        );
        assert_eq!(vars.refs, [VarRead { name: "ts0".into(), once: true }], "read once: in an expression");
        assert!(vars.uses_timestamp());
        assert!(vars.actions[0].call.params[3].is_string());
    }

    #[test]
    fn expressions_add_and_subtract_what_the_hit_holds() {
        let mut vars = Vars::default();
        vars.add_assignments("d=common_timestamp-$t+next_pid-1,t=common_timestamp.usecs,p=$q", &fields()).unwrap();
        assert_eq!(vars.refs[1], VarRead { name: "q".into(), once: false }, "a bare read is not read once");
        let field = |n: usize| if n == 1 { FieldValue::Signed(10) } else { FieldValue::Missing };
        let hit = HitValues { field: &field, now: &|| 5_000, refs: &[4_000, 77] };
        let values: Vec<u64> = vars.defs.iter().map(|def| def.expr.value(&hit)).collect();
        assert_eq!(values, [1_009, 5, 77]);
        let wraps = HitValues { field: &field, now: &|| 1, refs: &[3, 0] };
        assert_eq!(vars.defs[0].expr.value(&wraps), 1u64.wrapping_sub(3).wrapping_add(9));
    }

    #[test]
    fn products_and_quotients_come_before_sums_and_go_left_to_right() {
        let mut vars = Vars::default();
        vars.add_assignments(
            "a=next_pid-2*3,b=next_pid/2/5,c=100-next_pid*next_pid/4,d=next_pid/common_pid,e=next_pid*8/3",
            &fields(),
        )
        .unwrap();
        assert_eq!(
            vars.defs_text(),
            ":a=next_pid-2*3,b=next_pid/2/5,c=100-next_pid*next_pid/4,d=next_pid/common_pid,e=next_pid*8/3"
        );
        let field = |n: usize| if n == 1 { FieldValue::Signed(100) } else { FieldValue::Missing };
        let hit = HitValues { field: &field, now: &|| 0, refs: &[] };
        let values: Vec<u64> = vars.defs.iter().map(|def| def.expr.value(&hit)).collect();
        // 100-6; (100/2)/5; 100-(100*100/4); a field of 0 divides to -1;
        // (100*8)/3.
        assert_eq!(values, [94, 10, 100u64.wrapping_sub(2_500), u64::MAX, 266]);
        let error = |text: &str| Vars::default().add_assignments(text, &fields()).unwrap_err();
        assert_eq!(error("x=next_pid*"), ExprError::BadOperand("".into()));
        // Linux's refusals: a constant 0 divisor, a fourth operator, units
        // that do not match.
        assert_eq!(error("x=next_pid/0"), ExprError::DivisionByZero("next_pid/0".into()));
        assert_eq!(error("x=1+2-3*4/5"), ExprError::TooManyOperators("1+2-3*4/5".into()));
        assert_eq!(error("x=common_timestamp.usecs/1000"), ExprError::TimestampMismatch("common_timestamp.usecs/1000".into()));
        assert_eq!(
            error("x=common_timestamp-common_timestamp.usecs"),
            ExprError::TimestampMismatch("common_timestamp-common_timestamp.usecs".into())
        );
        let mut units = Vars::default();
        units.add_assignments("x=common_timestamp.usecs-$ts0,y=$a*2", &fields()).unwrap();
        let usecs = |read: usize| read == 0;
        assert_eq!(units.defs[0].expr.check_units(Some(&usecs)), Ok(()), "$ts0 holds microseconds");
        assert_eq!(units.defs[1].expr.check_units(Some(&|_| true)), Err(ExprError::TimestampMismatch("$a*2".into())));
        assert!(units.defs[0].expr.usecs(&usecs));
    }

    #[test]
    fn malformed_parts_say_why() {
        let error = |text: &str| Vars::default().add_assignments(text, &fields()).unwrap_err();
        assert_eq!(error("1x=next_pid"), ExprError::BadAssignment("1x=next_pid".into()));
        assert_eq!(error("x="), ExprError::BadAssignment("x=".into()));
        assert_eq!(error("x=nosuch"), ExprError::BadOperand("nosuch".into()));
        assert_eq!(error("x=next_pid-"), ExprError::BadOperand("".into()));
        assert_eq!(error("x=next_comm"), ExprError::NotANumber("next_comm".into()));
        assert_eq!(error("x=1,x=2"), ExprError::DuplicateVar("x".into()));
        let many: Vec<String> = (0..=MAX_VARS).map(|n| alloc::format!("v{n}=1")).collect();
        assert_eq!(error(&many.join(",")), ExprError::TooManyVars);
        let action = |text: &str| Vars::default().add_action(text, &fields()).unwrap_err();
        for bad in ["onmax($x).save(a)", "onmatch(sched).x()", "onmatch(a.b).trace()", "onmatch(a.b)x(y)", "onmatch(a.b).x(y"] {
            assert_eq!(action(bad), ExprError::BadAction(bad.into()), "{bad}");
        }
        assert_eq!(action("onmatch(a.b).s(nosuch)"), ExprError::BadOperand("nosuch".into()));
        let mut vars = Vars::default();
        vars.add_action("onmatch(a.b).s($other)", &fields()).unwrap();
        vars.finish().unwrap();
        assert_eq!(vars.refs, [VarRead { name: "other".into(), once: false }], "another histogram's, read as is");
    }
}
