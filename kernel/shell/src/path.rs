//! Paths as a Linux tracing user types them: relative to the working
//! directory (`cat trace` after `cd /sys/kernel/tracing`), or absolute under
//! one of tracefs's two mount points (`echo function >
//! /sys/kernel/tracing/current_tracer`, or the older
//! `/sys/kernel/debug/tracing`). [`resolve`] turns either into a path inside
//! tracefs: no leading or trailing `/`, the empty string for its root.
//! Nothing outside tracefs exists here, so a path that leaves it is an
//! error, never a guess.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// Where tracefs is mounted, as `pwd` shows it.
pub const TRACEFS: &str = "/sys/kernel/tracing";
/// The older mount point, under debugfs, which Linux still offers.
pub const DEBUGFS_TRACING: &str = "/sys/kernel/debug/tracing";

/// A path that names nothing in tracefs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathError {
    /// An absolute path outside tracefs.
    OutsideTracefs(String),
    /// `..` above tracefs's root.
    AboveRoot(String),
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathError::OutsideTracefs(path) => write!(f, "{path}: only tracefs is here, at {TRACEFS}"),
            PathError::AboveRoot(path) => write!(f, "{path}: leaves tracefs ({TRACEFS})"),
        }
    }
}

/// `path` inside tracefs, from the working directory `cwd` (itself a path
/// inside tracefs, as this returns them).
pub fn resolve(cwd: &str, path: &str) -> Result<String, PathError> {
    // An absolute path climbs with `..` anywhere (`/sys/kernel/tracing/../
    // tracing/trace`), as the kernel resolves it, before it is placed.
    let normal;
    let (base, rest) = match path.strip_prefix('/') {
        Some(_) => {
            normal = normalize(path);
            let rest = [TRACEFS, DEBUGFS_TRACING]
                .iter()
                .find_map(|root| under(&normal, root))
                .ok_or_else(|| PathError::OutsideTracefs(path.into()))?;
            ("", rest)
        }
        None => (cwd, path),
    };
    let mut parts: Vec<&str> = base.split('/').filter(|part| !part.is_empty()).collect();
    for part in rest.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop().ok_or_else(|| PathError::AboveRoot(path.into()))?;
            }
            name => parts.push(name),
        }
    }
    Ok(parts.join("/"))
}

/// An absolute path with its `.` and `..` taken out (`..` at `/` stays
/// there, as in POSIX).
fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            name => parts.push(name),
        }
    }
    alloc::format!("/{}", parts.join("/"))
}

/// What follows `root` in `path`, if `path` is `root` or below it.
fn under<'a>(path: &'a str, root: &str) -> Option<&'a str> {
    let rest = path.strip_prefix(root)?;
    (rest.is_empty() || rest.starts_with('/')).then_some(rest)
}

/// How `pwd` shows a path inside tracefs.
pub fn absolute(path: &str) -> String {
    match path {
        "" => TRACEFS.into(),
        path => alloc::format!("{TRACEFS}/{path}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_start_at_the_working_directory() {
        assert_eq!(resolve("", "trace").unwrap(), "trace");
        assert_eq!(resolve("instances/foo", "trace").unwrap(), "instances/foo/trace");
        assert_eq!(resolve("events", "sched/enable").unwrap(), "events/sched/enable");
        assert_eq!(resolve("", "./events//kprobes/").unwrap(), "events/kprobes");
    }

    #[test]
    fn absolute_paths_under_either_mount_point() {
        for root in [TRACEFS, DEBUGFS_TRACING] {
            assert_eq!(resolve("instances/foo", root).unwrap(), "");
            assert_eq!(resolve("instances/foo", &alloc::format!("{root}/")).unwrap(), "");
            assert_eq!(resolve("", &alloc::format!("{root}/current_tracer")).unwrap(), "current_tracer");
            assert_eq!(resolve("events", &alloc::format!("{root}/instances/a/trace")).unwrap(), "instances/a/trace");
        }
    }

    #[test]
    fn dot_dot_climbs_but_not_out_of_tracefs() {
        assert_eq!(resolve("instances/foo", "..").unwrap(), "instances");
        assert_eq!(resolve("instances/foo", "../../trace").unwrap(), "trace");
        assert_eq!(resolve("", "..").unwrap_err(), PathError::AboveRoot("..".into()));
        let above = "/sys/kernel/tracing/..";
        assert_eq!(resolve("", above).unwrap_err(), PathError::OutsideTracefs(above.into()), "/sys/kernel: not here");
        // An absolute path may climb and come back, as the kernel resolves it.
        assert_eq!(resolve("", "/sys/kernel/tracing/../tracing/options").unwrap(), "options");
        assert_eq!(resolve("events", "/sys/kernel/debug/../tracing/./trace").unwrap(), "trace");
        assert_eq!(resolve("", "/../sys/kernel/tracing/trace").unwrap(), "trace", "'..' at / stays at /");
    }

    #[test]
    fn nothing_outside_tracefs_exists() {
        for path in ["/", "/proc/kallsyms", "/sys/kernel/tracingx", "/sys/kernel", "/sys/kernel/debug"] {
            assert_eq!(resolve("", path).unwrap_err(), PathError::OutsideTracefs(path.into()), "{path}");
        }
    }

    #[test]
    fn pwd_shows_the_mount_point() {
        assert_eq!(absolute(""), "/sys/kernel/tracing");
        assert_eq!(absolute("instances/foo"), "/sys/kernel/tracing/instances/foo");
    }
}
