//! Patch sites: what the compiler left at every traced function's entry,
//! what each site holds now, and the plan that says what it must hold.
//!
//! - `sites`: the site table, one entry per patchable function, each
//!   patch verified against what the entry remembers before it is written;
//! - [`geometry`]: where a site's bytes are relative to its function;
//! - [`plan`]: from the registered ops to what each site must call (none,
//!   one ops directly, the list), computed on the host too;
//! - [`bitmap`]: the small sets the plan works with.
//!
//! The registry ([`crate::registry`]) drives all of it: a change of ops or
//! filters recomputes the plan and patches the sites it changes, in one
//! batch (`arch::text`).

pub mod bitmap;
pub mod geometry;
pub mod plan;
#[cfg(target_os = "none")]
pub(crate) mod sites;
