//! Synthetic events, as Linux's: events defined at run time from their
//! fields alone, recorded by `hist` triggers' `onmatch()` actions
//! (`crate::events::hist::expr`), and then like any event: `enable`, `filter`,
//! `trigger`, `hist`, `format` and `id` under `events/synthetic/NAME/`.
//!
//! ```text
//! echo 'wakeup_latency u64 lat; pid_t pid; char comm[16]' >> synthetic_events
//! ```
//!
//! A definition is a name and up to [`MAX_FIELDS`] fields, each `TYPE
//! NAME` (Linux's integer types: `u64`..`s8`, `int`, `unsigned int`,
//! `long`, `unsigned long`, `pid_t`, `bool`, `char`...) or `char
//! NAME[N]`, a string of at most N bytes. A record holds the common header,
//! then each field in 8-byte slots (a string in as many as its N takes),
//! as Linux lays synthetic events out; its line in `trace` is
//! `NAME: field=value field=value`.
//!
//! The kernel side keeps the defined events ([`define`], [`remove`]) and
//! records them (`Synth` is the [`SynthTarget`](crate::events::hist::SynthTarget) an action fires). A
//! record is written with no allocation and no lock; an action that fires
//! an event whose own triggers fire another is allowed to nest
//! [`MAX_NESTING`] deep on a CPU (a loop of actions stops there, the
//! deeper events dropped), and one outermost action records at most
//! [`MAX_FIRES`] events in all, however many actions fan out from it.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt::{self, Write};

use crate::events::filter::{FieldKind, FieldValue, FilterField};
use crate::events::record::Common;
use ring_buffer::payload::Payload;

/// The synthetic events' group (`events/synthetic/...`).
pub const GROUP: &str = "synthetic";
/// The most fields a synthetic event has.
pub const MAX_FIELDS: usize = crate::events::hist::expr::MAX_PARAMS;
/// The longest string field.
pub const MAX_STRING: usize = 64;
/// The longest event or field name (Linux's `MAX_EVENT_NAME_LEN` less its
/// NUL).
pub const MAX_NAME: usize = 63;

/// Where a record's fields start (after the common header).
const FIELDS_AT: usize = crate::events::record::COMMON_SIZE;

/// A field's type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SynthType {
    /// As `synthetic_events` lists it (`u64`, `unsigned int`, `char[16]`).
    name: String,
    /// Bytes: of the number, or the string's N.
    size: usize,
    signed: bool,
    string: bool,
}

impl SynthType {
    /// Linux's synthetic field types: (name, size, signed: as Linux's
    /// `synth_field_signed`, every type but those starting with `u` and
    /// `gfp_t`).
    const NUMBERS: [(&'static str, usize, bool); 17] = [
        ("s64", 8, true),
        ("u64", 8, false),
        ("s32", 4, true),
        ("u32", 4, false),
        ("s16", 2, true),
        ("u16", 2, false),
        ("s8", 1, true),
        ("u8", 1, false),
        ("char", 1, true),
        ("unsigned char", 1, false),
        ("int", 4, true),
        ("unsigned int", 4, false),
        ("long", 8, true),
        ("unsigned long", 8, false),
        ("bool", 1, true),
        ("pid_t", 4, true),
        ("gfp_t", 4, false),
    ];

    fn number(name: &str) -> Option<SynthType> {
        let (name, size, signed) = Self::NUMBERS.iter().find(|(known, _, _)| *known == name)?;
        Some(SynthType { name: name.to_string(), size: *size, signed: *signed, string: false })
    }

    fn string(len: usize) -> SynthType {
        SynthType { name: alloc::format!("char[{len}]"), size: len, signed: false, string: true }
    }

    /// The 8-byte slots it takes in a record.
    fn slots(&self) -> usize {
        self.size.div_ceil(8).max(1)
    }

    /// Its `printf` conversion in the `format` file (Linux's
    /// `synth_field_fmt`).
    fn conversion(&self) -> &'static str {
        match (self.string, self.size, self.signed, self.name.as_str()) {
            (true, ..) => "%s",
            (_, _, _, "gfp_t") => "%x",
            (_, _, _, "long") => "%ld",
            (_, _, _, "unsigned long") => "%lu",
            (_, 8, true, _) => "%lld",
            (_, 8, false, _) => "%llu",
            (_, _, true, _) => "%d",
            (_, _, false, _) => "%u",
        }
    }

    /// A value as the field holds it: cut to its size, sign-extended if
    /// signed.
    fn held(&self, raw: u64) -> FieldValue<'static> {
        let bits = 8 * self.size as u32;
        let cut = if bits >= 64 { raw } else { raw & ((1u64 << bits) - 1) };
        match self.signed {
            true if bits < 64 => FieldValue::Signed(((cut << (64 - bits)) as i64) >> (64 - bits)),
            true => FieldValue::Signed(cut as i64),
            false => FieldValue::Unsigned(cut),
        }
    }
}

/// One field of a synthetic event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SynthField {
    pub name: String,
    pub ty: SynthType,
    /// Its byte offset in a record.
    at: usize,
}

impl SynthField {
    /// Whether it is a string.
    pub fn is_string(&self) -> bool {
        self.ty.string
    }
}

/// A synthetic event's definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SynthDef {
    pub name: String,
    pub fields: Vec<SynthField>,
}

/// Why a definition was refused; nothing changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SynthError {
    /// An event or field name that is no C identifier of at most
    /// [`MAX_NAME`] characters.
    BadName(String),
    NoFields,
    TooManyFields,
    /// A type synthetic fields do not have.
    BadType(String),
    /// A field defined twice.
    DuplicateField(String),
    /// `char NAME[N]` with N of 0 or past [`MAX_STRING`] (or an array of
    /// another type).
    BadArray(String),
    Exists(String),
    NoSuchEvent(String),
    /// Enabled, with triggers, or recorded by a `hist` action.
    Busy(String),
    /// Every event type id was used once.
    NoIds,
}

impl fmt::Display for SynthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SynthError::BadName(name) => write!(f, "synthetic: illegal name '{name}'"),
            SynthError::NoFields => write!(f, "synthetic: an event needs at least one field (NAME TYPE FIELD[; TYPE FIELD...])"),
            SynthError::TooManyFields => write!(f, "synthetic: at most {MAX_FIELDS} fields"),
            SynthError::BadType(ty) => write!(
                f,
                "synthetic: unknown type '{ty}' (u64, s64, u32, s32, u16, s16, u8, s8, int, unsigned int, long, unsigned long, pid_t, bool, char, char NAME[N])"
            ),
            SynthError::DuplicateField(name) => write!(f, "synthetic: field '{name}' defined twice"),
            SynthError::BadArray(field) => write!(f, "synthetic: '{field}': only char arrays of 1 to {MAX_STRING} bytes"),
            SynthError::Exists(name) => write!(f, "synthetic: event '{name}' already exists"),
            SynthError::NoSuchEvent(name) => write!(f, "synthetic: no event '{name}'"),
            SynthError::Busy(name) => write!(
                f,
                "synthetic: event '{name}' is enabled, has triggers, is named by another event's trigger or is recorded by a hist action; remove those first"
            ),
            SynthError::NoIds => write!(f, "synthetic: no event type ids left (each is used once)"),
        }
    }
}

/// Whether `name` is a C identifier short enough.
fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= MAX_NAME
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A field's name and type from its words: `TYPE NAME`, `char NAME[N]`,
/// or `char[N] NAME` (how Linux lists a string, and takes it back).
fn name_and_type<'t>(field: &str, last: &'t str, ty: &str) -> Result<(&'t str, SynthType), SynthError> {
    let string = |len: &str| match len.parse::<usize>() {
        Ok(len @ 1..=MAX_STRING) => Ok(SynthType::string(len)),
        _ => Err(SynthError::BadArray(field.to_string())),
    };
    if let Some(len) = ty.strip_prefix("char[").and_then(|len| len.strip_suffix(']')) {
        return Ok((last, string(len)?));
    }
    match last.split_once('[') {
        Some((name, len)) if ty == "char" => Ok((name, string(len.strip_suffix(']').unwrap_or("x"))?)),
        Some(_) => Err(SynthError::BadArray(field.to_string())),
        None => Ok((last, SynthType::number(ty).ok_or_else(|| SynthError::BadType(ty.to_string()))?)),
    }
}

impl SynthDef {
    /// Parses `NAME TYPE FIELD[; TYPE FIELD...]` (a trailing `;` allowed).
    pub fn parse(text: &str) -> Result<SynthDef, SynthError> {
        let text = text.trim();
        let (name, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
        if !is_name(name) {
            return Err(SynthError::BadName(name.to_string()));
        }
        let mut fields: Vec<SynthField> = Vec::new();
        let mut at = FIELDS_AT;
        for field in rest.split(';').map(str::trim).filter(|field| !field.is_empty()) {
            let words: Vec<&str> = field.split_whitespace().collect();
            let (last, ty) = words.split_last().expect("not empty");
            if ty.is_empty() {
                return Err(SynthError::BadType(field.to_string()));
            }
            let (name, ty) = name_and_type(field, last, &ty.join(" "))?;
            if !is_name(name) {
                return Err(SynthError::BadName(name.to_string()));
            }
            if fields.iter().any(|field| field.name == name) {
                return Err(SynthError::DuplicateField(name.to_string()));
            }
            if fields.len() == MAX_FIELDS {
                return Err(SynthError::TooManyFields);
            }
            let slots = ty.slots();
            fields.push(SynthField { name: name.to_string(), ty, at });
            at += 8 * slots;
        }
        if fields.is_empty() {
            return Err(SynthError::NoFields);
        }
        Ok(SynthDef { name: name.to_string(), fields })
    }

    /// Its line in `synthetic_events`: `NAME\tTYPE FIELD; TYPE FIELD`.
    pub fn line(&self) -> String {
        alloc::format!("{}\t{}", self.name, self.fields_text())
    }

    /// Its line in `dynamic_events`: `s:synthetic/NAME\tTYPE FIELD; TYPE FIELD`.
    pub fn dynamic_line(&self) -> String {
        alloc::format!("s:{GROUP}/{}", self.line())
    }

    /// `TYPE FIELD; TYPE FIELD`.
    fn fields_text(&self) -> String {
        let fields: Vec<String> = self.fields.iter().map(|field| alloc::format!("{} {}", field.ty.name, field.name)).collect();
        fields.join("; ")
    }

    /// A record's size.
    pub fn record_size(&self) -> usize {
        self.fields.last().map_or(FIELDS_AT, |field| field.at + 8 * field.ty.slots())
    }

    /// The fields filters, triggers and `hist` name: `common_pid`, then
    /// its own, in the order [`field_value`](Self::field_value) numbers
    /// them.
    pub fn filter_fields(&self) -> Vec<FilterField> {
        let kind = |field: &SynthField| match (field.ty.string, field.ty.signed) {
            (true, _) => FieldKind::String,
            (false, true) => FieldKind::Signed,
            (false, false) => FieldKind::Unsigned,
        };
        core::iter::once(FilterField::new("common_pid", FieldKind::Signed))
            .chain(self.fields.iter().map(|field| FilterField::new(&field.name, kind(field))))
            .collect()
    }

    /// Field `n` of [`filter_fields`](Self::filter_fields) of a record
    /// about to be written from `values` (an action's parameters, in the
    /// fields' order), by a task of `pid`.
    pub fn field_value<'a>(&self, n: usize, pid: i32, values: &[FieldValue<'a>]) -> FieldValue<'a> {
        let Some(index) = n.checked_sub(1) else { return FieldValue::Signed(pid.into()) };
        let (Some(field), Some(value)) = (self.fields.get(index), values.get(index)) else { return FieldValue::Missing };
        match *value {
            FieldValue::Str(bytes) if field.ty.string => {
                let bytes = bytes.split(|&b| b == 0).next().unwrap_or(&[]);
                FieldValue::Str(&bytes[..bytes.len().min(field.ty.size)])
            }
            FieldValue::Unsigned(raw) => field.ty.held(raw),
            FieldValue::Signed(raw) => field.ty.held(raw as u64),
            _ => FieldValue::Missing,
        }
    }

    /// Writes a record of `values` into `out` ([`record_size`](Self::record_size) bytes).
    pub fn encode(&self, common: Common, values: &[FieldValue], out: &mut Payload) {
        common.encode(out);
        out.zero(FIELDS_AT, self.record_size());
        for (n, field) in self.fields.iter().enumerate() {
            match self.field_value(n + 1, common.pid, values) {
                FieldValue::Str(bytes) => out.put_slice(field.at, bytes),
                FieldValue::Unsigned(value) => out.put_u64(field.at, value),
                FieldValue::Signed(value) => out.put_u64(field.at, value as u64),
                FieldValue::Missing => {}
            }
        }
    }

    /// A record's line text (after the context columns), as Linux prints
    /// a synthetic event: `NAME: field=value field=value`.
    pub fn write_record(&self, bytes: &[u8], out: &mut dyn Write) -> fmt::Result {
        write!(out, "{}: ", self.name)?;
        for (n, field) in self.fields.iter().enumerate() {
            if n > 0 {
                out.write_char(' ')?;
            }
            write!(out, "{}=", field.name)?;
            let Some(slot) = bytes.get(field.at..field.at + field.ty.size) else { return out.write_str("(missing)") };
            if field.ty.string {
                let text = slot.split(|&b| b == 0).next().unwrap_or(&[]);
                out.write_str(&String::from_utf8_lossy(text))?;
                continue;
            }
            let mut word = [0u8; 8];
            word[..slot.len()].copy_from_slice(slot);
            match field.ty.held(u64::from_le_bytes(word)) {
                FieldValue::Signed(value) => write!(out, "{value}")?,
                FieldValue::Unsigned(value) if field.ty.name == "gfp_t" => write!(out, "{value:x}")?,
                FieldValue::Unsigned(value) => write!(out, "{value}")?,
                _ => {}
            }
        }
        Ok(())
    }

    /// Its `format` file, as Linux describes a synthetic event (`id`: its
    /// type id).
    pub fn format(&self, id: u16) -> String {
        let mut fields = String::new();
        for field in &self.fields {
            let declared = match field.ty.string {
                true => alloc::format!("char {}[{}]", field.name, field.ty.size),
                false => alloc::format!("{} {}", field.ty.name, field.name),
            };
            fields.push_str(&alloc::format!(
                "\tfield:{declared};\toffset:{};\tsize:{};\tsigned:{};\n",
                field.at,
                field.ty.size,
                u8::from(field.ty.signed)
            ));
        }
        let conversions: Vec<String> =
            self.fields.iter().map(|field| alloc::format!("{}={}", field.name, field.ty.conversion())).collect();
        let args: String = self.fields.iter().map(|field| alloc::format!(", REC->{}", field.name)).collect();
        crate::events::record::format_text(&self.name, id, &fields, &alloc::format!("\"{}\"{args}", conversions.join(" ")))
    }
}

#[cfg(target_os = "none")]
pub use kernel_side::*;

#[cfg(target_os = "none")]
mod kernel_side {
    use alloc::string::ToString;
    use alloc::sync::Arc;
    use alloc::vec::Vec;
    use core::fmt::{self, Write};
    use core::sync::atomic::{AtomicBool, AtomicU16, AtomicU8, AtomicUsize, Ordering};

    use super::{SynthDef, SynthError, GROUP};
    use crate::array::trace_array::TraceArray;
    use crate::events::filter::FieldValue;
    use crate::events::hist::SynthTarget;
    use crate::events::record::Common;
    use crate::events::state::EventState;

    /// How deep actions may nest on a CPU (an event's trigger firing
    /// another's action...).
    pub const MAX_NESTING: u8 = 4;

    /// How many synthetic events one outermost action and what it sets off
    /// may record on a CPU: nesting bounds the depth, this the breadth (an
    /// event with several triggers, each with several actions that record
    /// it again, would otherwise record thousands of events a hit, with
    /// interrupts masked). The events past it are dropped.
    pub const MAX_FIRES: u16 = 64;

    /// A defined synthetic event.
    pub struct Synth {
        def: SynthDef,
        id: u16,
        state: EventState,
        /// Whether the top level ever recorded it (its records may be in
        /// the top level's buffers).
        was_enabled: AtomicBool,
        /// The `hist` actions that record it (it cannot go while there
        /// are some).
        actions: AtomicUsize,
    }

    impl Synth {
        /// Its definition.
        pub fn def(&self) -> &SynthDef {
            &self.def
        }

        /// The type id its records carry.
        pub fn id(&self) -> u16 {
            self.id
        }

        /// Its switches, filter and triggers in every trace array.
        pub fn state(&self) -> &EventState {
            &self.state
        }

        /// `echo 0|1 > events/synthetic/NAME/enable` in `array` (in soft
        /// mode, the soft switch too, as for any event).
        pub fn set_enabled(&self, array: &TraceArray, on: bool) {
            if on && array.is_top() {
                self.was_enabled.store(true, Ordering::Relaxed);
            }
            self.state.set_enabled(array, on);
        }

        /// For a new `enable_event`/`disable_event` trigger in `array`
        /// naming it: the switch of `array`'s copy, in soft mode while such
        /// a trigger exists (and the event cannot be removed); `None` if it
        /// is being removed.
        pub fn acquire_soft(self: &Arc<Self>, array: &TraceArray) -> Option<Arc<dyn crate::events::trigger::EventSwitch>> {
            if array.is_top() {
                // What the soft switch turns on records (as `enable` would).
                self.was_enabled.store(true, Ordering::Relaxed);
            }
            self.state.acquire_soft(array, self.clone(), |synth: &Arc<Synth>| &synth.state)
        }

        /// A trigger naming it in `array` went.
        pub fn release_soft(&self, array: &TraceArray) {
            self.state.release_soft(array);
        }
    }

    /// Each CPU's nesting of actions.
    static NESTING: [AtomicU8; arch::MAX_CPUS] = [const { AtomicU8::new(0) }; arch::MAX_CPUS];
    /// Each CPU's events recorded since its outermost action began.
    static FIRES: [AtomicU16; arch::MAX_CPUS] = [const { AtomicU16::new(0) }; arch::MAX_CPUS];

    impl SynthTarget for Synth {
        /// Records it from an action (inside an event's triggers, with
        /// interrupts masked: the nesting count is this CPU's alone).
        fn fire(&self, values: &[FieldValue]) {
            if !self.state.is_live() {
                return;
            }
            let cpu = arch::cpu::id();
            let nesting = &NESTING[cpu];
            let depth = nesting.fetch_add(1, Ordering::Relaxed);
            if depth == 0 {
                FIRES[cpu].store(0, Ordering::Relaxed);
            }
            // This CPU's alone, interrupts masked: a load and a store.
            let fired = FIRES[cpu].load(Ordering::Relaxed);
            if depth >= MAX_NESTING || fired >= MAX_FIRES {
                nesting.fetch_sub(1, Ordering::Relaxed);
                return;
            }
            FIRES[cpu].store(fired + 1, Ordering::Relaxed);
            let common: Common = crate::events::record::event_common(self.id);
            let fields = |n| self.def.field_value(n, common.pid, values);
            let kept = |slot| crate::events::pid::records_current_in(slot);
            self.state.hit(&kept, &fields, self.def.record_size(), &|out| self.def.encode(common, values, out));
            nesting.fetch_sub(1, Ordering::Relaxed);
        }

        fn hold(&self) {
            self.actions.fetch_add(1, Ordering::Relaxed);
        }

        fn release(&self) {
            self.actions.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// The defined events, in definition order (writers in task context).
    static EVENTS: arch::sync::Mutex<Vec<Arc<Synth>>> = arch::sync::Mutex::new(Vec::new());

    /// The event called `name`.
    pub fn find(name: &str) -> Option<Arc<Synth>> {
        EVENTS.lock().iter().find(|synth| synth.def.name == name).cloned()
    }

    /// Every event, in definition order.
    pub fn all() -> Vec<Arc<Synth>> {
        EVENTS.lock().clone()
    }

    /// Defines the event `text` describes (`NAME TYPE FIELD; ...`); a
    /// static event's name (`taken`) or a defined one is refused.
    pub fn define(text: &str, taken: impl Fn(&str) -> bool) -> Result<(), SynthError> {
        let def = SynthDef::parse(text)?;
        // Asked before the lock: `taken` may take other events' locks.
        let taken = taken(&def.name);
        let mut events = EVENTS.lock();
        if taken || events.iter().any(|synth| synth.def.name == def.name) {
            return Err(SynthError::Exists(alloc::format!("{GROUP}/{}", def.name)));
        }
        let id = crate::events::record::new_dynamic_id().ok_or(SynthError::NoIds)?;
        let (was_enabled, actions) = (AtomicBool::new(false), AtomicUsize::new(0));
        events.push(Arc::new(Synth { def, id, state: EventState::new(), was_enabled, actions }));
        Ok(())
    }

    /// Removes the event `name`, or (`None`) every one: refused, changing
    /// nothing, while one is enabled, has triggers or is an action's.
    /// Answers the trace arrays (a bit per slot) whose buffers may hold its
    /// records, for the caller to empty.
    pub fn remove(name: Option<&str>) -> Result<u32, SynthError> {
        let mut events = EVENTS.lock();
        let doomed = |synth: &Arc<Synth>| name.is_none_or(|name| synth.def.name == name);
        if let Some(name) = name.filter(|_| !events.iter().any(doomed)) {
            return Err(SynthError::NoSuchEvent(name.to_string()));
        }
        retire_all(events.iter().filter(|synth| doomed(synth)))?;
        let mut stale = 0;
        for synth in events.iter().filter(|synth| doomed(synth)) {
            stale |= u32::from(synth.was_enabled.load(Ordering::Relaxed)) | synth.state.arrays().ever_enabled();
        }
        events.retain(|synth| !doomed(synth));
        Ok(stale)
    }

    /// Whether [`remove`]`(None)` would remove every event now: each could
    /// be retired (and is let go again). For a write that must not start
    /// removing what it cannot finish (`> dynamic_events`, which removes
    /// the probe events too).
    pub fn check_removable_all() -> Result<(), SynthError> {
        let events = EVENTS.lock();
        let retired = retire_all(events.iter())?;
        retired.iter().for_each(|synth| synth.state.unretire());
        Ok(())
    }

    /// Retires each of `doomed` in turn (no trigger can name it from then
    /// on), if it is not on, triggered, named by a trigger (soft mode) or
    /// recorded by an action, here or in an instance; all of them or none.
    fn retire_all<'a>(doomed: impl Iterator<Item = &'a Arc<Synth>>) -> Result<Vec<&'a Arc<Synth>>, SynthError> {
        let mut retired: Vec<&Arc<Synth>> = Vec::new();
        for synth in doomed {
            let state = &synth.state;
            let armed =
                || state.on.load(Ordering::Relaxed) || state.triggers().is_set() || synth.actions.load(Ordering::Relaxed) > 0;
            if !state.retire(armed) {
                retired.iter().for_each(|synth| synth.state.unretire());
                return Err(SynthError::Busy(synth.def.name.clone()));
            }
            retired.push(synth);
        }
        Ok(retired)
    }

    /// `cat synthetic_events`: a definition a line (`dynamic`: as
    /// `dynamic_events` lists them).
    pub fn write_definitions(out: &mut dyn Write, dynamic: bool) -> fmt::Result {
        EVENTS.lock().iter().try_for_each(|synth| match dynamic {
            true => writeln!(out, "{}", synth.def.dynamic_line()),
            false => writeln!(out, "{}", synth.def.line()),
        })
    }

    /// A synthetic event's record's text (`NAME: field=value ...`), if
    /// `payload` is one.
    pub fn write_record(payload: &[u8], out: &mut dyn Write) -> Option<fmt::Result> {
        let kind = Common::decode(payload)?.kind;
        let synth = EVENTS.lock().iter().find(|synth| synth.id == kind).cloned()?;
        Some(synth.def.write_record(payload, out))
    }

    /// The `format` text of the synthetic event of type `kind`, if there is
    /// one.
    pub fn format_of(kind: u16) -> Option<alloc::string::String> {
        let synth = EVENTS.lock().iter().find(|synth| synth.id == kind).cloned()?;
        Some(synth.def.format(synth.id))
    }

    /// `rmdir instances/NAME`: no synthetic event records into it or has
    /// triggers there any more.
    pub fn forget_array(array: &TraceArray) {
        EVENTS.lock().iter().for_each(|synth| synth.state.arrays().forget(array));
    }

    /// The name of an event a `hist` action could fire, as given.
    pub fn target(name: &str) -> Option<(Arc<dyn SynthTarget>, Vec<bool>)> {
        let synth = find(name)?;
        let strings = synth.def.fields.iter().map(|field| field.is_string()).collect();
        Some((synth as Arc<dyn SynthTarget>, strings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_read_back_as_linux_lists_them() {
        let def = SynthDef::parse("wakeup_latency  u64 lat; pid_t pid;unsigned int  prio; char comm[16];").unwrap();
        assert_eq!(def.line(), "wakeup_latency\tu64 lat; pid_t pid; unsigned int prio; char[16] comm");
        assert_eq!(def.dynamic_line(), "s:synthetic/wakeup_latency\tu64 lat; pid_t pid; unsigned int prio; char[16] comm");
        assert_eq!(SynthDef::parse(&def.line()).unwrap(), def, "its own listing defines it again, as Linux's");
        assert_eq!(def.record_size(), 8 + 8 + 8 + 8 + 16);
        let format = def.format(3000);
        assert!(format.starts_with("name: wakeup_latency\nID: 3000\nformat:\n\tfield:unsigned short common_type;"), "{format}");
        assert!(format.contains("\tfield:u64 lat;\toffset:8;\tsize:8;\tsigned:0;\n"), "{format}");
        assert!(format.contains("\tfield:pid_t pid;\toffset:16;\tsize:4;\tsigned:1;\n"), "{format}");
        assert!(format.contains("\tfield:char comm[16];\toffset:32;\tsize:16;\tsigned:0;\n"), "{format}");
        assert!(
            format.ends_with("print fmt: \"lat=%llu pid=%d prio=%u comm=%s\", REC->lat, REC->pid, REC->prio, REC->comm\n"),
            "{format}"
        );
    }

    #[test]
    fn records_hold_values_as_their_types_do() {
        let def = SynthDef::parse("ev s8 small; u64 big; char name[4]; gfp_t flags").unwrap();
        let common = Common { kind: 3000, pid: 7, ..Common::default() };
        let values =
            [FieldValue::Unsigned(0x1ff), FieldValue::Signed(-2), FieldValue::Str(b"abcdef"), FieldValue::Unsigned(0xc0)];
        let bytes = ring_buffer::payload::encode_to_vec(def.record_size(), |out| def.encode(common, &values, out));
        let mut line = String::new();
        def.write_record(&bytes, &mut line).unwrap();
        assert_eq!(line, "ev: small=-1 big=18446744073709551614 name=abcd flags=c0");
        assert!(matches!(def.field_value(0, 7, &values), FieldValue::Signed(7)), "common_pid first");
        assert!(matches!(def.field_value(1, 7, &values), FieldValue::Signed(-1)), "cut to a signed byte");
        let kinds: Vec<FieldKind> = def.filter_fields().iter().map(|field| field.kind).collect();
        assert_eq!(kinds, [FieldKind::Signed, FieldKind::Signed, FieldKind::Unsigned, FieldKind::String, FieldKind::Unsigned]);
    }

    #[test]
    fn bad_definitions_say_why() {
        let error = |text: &str| SynthDef::parse(text).unwrap_err();
        assert_eq!(error("9ev u64 x"), SynthError::BadName("9ev".into()));
        assert_eq!(error("ev"), SynthError::NoFields);
        assert_eq!(error("ev ;"), SynthError::NoFields);
        assert_eq!(error("ev float x"), SynthError::BadType("float".into()));
        assert_eq!(error("ev x"), SynthError::BadType("x".into()));
        assert_eq!(error("ev u64 x; u32 x"), SynthError::DuplicateField("x".into()));
        assert_eq!(error("ev u64 x[2]"), SynthError::BadArray("u64 x[2]".into()));
        assert_eq!(error("ev char s[0]"), SynthError::BadArray("char s[0]".into()));
        assert_eq!(error("ev char s[65]"), SynthError::BadArray("char s[65]".into()));
        assert_eq!(error("ev u64 a-b"), SynthError::BadName("a-b".into()));
        let many: Vec<String> = (0..=MAX_FIELDS).map(|n| alloc::format!("u64 f{n}")).collect();
        assert_eq!(error(&alloc::format!("ev {}", many.join(";"))), SynthError::TooManyFields);
    }
}
