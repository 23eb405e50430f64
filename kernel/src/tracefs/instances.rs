//! The `instances/` directory: `mkdir instances/NAME` makes a trace array
//! with its own copy of the per-array files, `rmdir` removes it; and the
//! listing of the files an instance has.

use super::events::event_names;
use super::per_cpu::per_cpu_names;
use super::Scope;
use super::TracefsError;
use super::FILES;
use alloc::format;
use alloc::string::String;

use trace::array::options::TraceOption;

/// The files of instance `name`, for `ls instances/NAME`.
pub fn instance_names(name: &str) -> Option<impl Iterator<Item = String>> {
    trace::array::instances::find(name)?;
    let prefix = format!("instances/{name}/");
    let files = FILES.iter().filter(|file| file.scope == Scope::Array).map(|file| format!("{prefix}{}", file.name));
    let options = TraceOption::ALL
        .into_iter()
        .filter(|option| !option.top_level_only())
        .map(|option| format!("{prefix}options/{}", option.name()));
    let events = event_names(&prefix);
    Some(files.chain(options).chain(per_cpu_names(&prefix)).chain(events).collect::<alloc::vec::Vec<_>>().into_iter())
}

/// `mkdir instances/NAME`.
pub fn mkdir(path: &str) -> Result<(), TracefsError> {
    Ok(trace::array::instances::create(instance_dir(path)?)?)
}

/// `rmdir instances/NAME`.
pub fn rmdir(path: &str) -> Result<(), TracefsError> {
    Ok(trace::array::instances::remove(instance_dir(path)?, super::events::forget_array)?)
}

/// The NAME of `instances/NAME` (the only directories one makes). `path`
/// is resolved: empty is the root (`mkdir instances/..`).
pub(super) fn instance_dir(path: &str) -> Result<&str, TracefsError> {
    let shown = if path.is_empty() { "/sys/kernel/tracing" } else { path };
    path.trim_end_matches('/')
        .strip_prefix("instances/")
        .filter(|name| !name.is_empty())
        .ok_or_else(|| TracefsError::Invalid(format!("{shown}: only instances/NAME can be made or removed")))
}
