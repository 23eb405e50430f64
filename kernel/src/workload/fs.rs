//! A small in-memory file system: a tree of directories and byte files with
//! the usual operations, each a separate traced function.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// A directory: names to nodes.
#[derive(Default)]
pub struct Dir {
    entries: BTreeMap<String, Node>,
}

/// A file or a directory.
pub enum Node {
    File(Vec<u8>),
    Dir(Dir),
}

/// Why an operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsError {
    NotFound,
    Exists,
    NotADirectory,
    IsADirectory,
    InvalidPath,
}

/// A file system: its root directory.
#[derive(Default)]
pub struct Fs {
    root: Dir,
}

/// Splits `/a/b/c` into (`["a", "b"]`, `"c"`).
#[inline(never)]
fn split(path: &str) -> Result<(Vec<&str>, &str), FsError> {
    let mut parts: Vec<&str> = path.split('/').filter(|part| !part.is_empty()).collect();
    let name = parts.pop().ok_or(FsError::InvalidPath)?;
    Ok((parts, name))
}

/// The directory at `components` below `dir`.
#[inline(never)]
fn walk<'a>(dir: &'a mut Dir, components: &[&str]) -> Result<&'a mut Dir, FsError> {
    let mut current = dir;
    for component in components {
        current = match current.entries.get_mut(*component) {
            Some(Node::Dir(next)) => next,
            Some(Node::File(_)) => return Err(FsError::NotADirectory),
            None => return Err(FsError::NotFound),
        };
    }
    Ok(current)
}

/// The node at `path`.
#[inline(never)]
pub fn lookup<'a>(fs: &'a mut Fs, path: &str) -> Result<&'a mut Node, FsError> {
    let (parents, name) = split(path)?;
    walk(&mut fs.root, &parents)?.entries.get_mut(name).ok_or(FsError::NotFound)
}

#[inline(never)]
fn insert(fs: &mut Fs, path: &str, node: Node) -> Result<(), FsError> {
    let (parents, name) = split(path)?;
    let dir = walk(&mut fs.root, &parents)?;
    if dir.entries.contains_key(name) {
        return Err(FsError::Exists);
    }
    dir.entries.insert(name.to_string(), node);
    Ok(())
}

/// Creates a directory.
#[inline(never)]
pub fn mkdir(fs: &mut Fs, path: &str) -> Result<(), FsError> {
    insert(fs, path, Node::Dir(Dir::default()))
}

/// Creates an empty file.
#[inline(never)]
pub fn create(fs: &mut Fs, path: &str) -> Result<(), FsError> {
    insert(fs, path, Node::File(Vec::new()))
}

/// Appends `data` to a file.
#[inline(never)]
pub fn write(fs: &mut Fs, path: &str, data: &[u8]) -> Result<usize, FsError> {
    match lookup(fs, path)? {
        Node::File(contents) => {
            contents.extend_from_slice(data);
            Ok(data.len())
        }
        Node::Dir(_) => Err(FsError::IsADirectory),
    }
}

/// A file's contents.
#[inline(never)]
pub fn read(fs: &mut Fs, path: &str) -> Result<Vec<u8>, FsError> {
    match lookup(fs, path)? {
        Node::File(contents) => Ok(contents.clone()),
        Node::Dir(_) => Err(FsError::IsADirectory),
    }
}

/// Removes a file (or an empty directory).
#[inline(never)]
pub fn unlink(fs: &mut Fs, path: &str) -> Result<(), FsError> {
    let (parents, name) = split(path)?;
    let dir = walk(&mut fs.root, &parents)?;
    match dir.entries.get(name) {
        Some(Node::Dir(child)) if !child.entries.is_empty() => Err(FsError::Exists),
        Some(_) => {
            dir.entries.remove(name);
            Ok(())
        }
        None => Err(FsError::NotFound),
    }
}

/// The `run fs` scenario: builds a small tree, writes and reads files back,
/// removes one, and checks the results.
#[inline(never)]
pub fn run() -> String {
    let mut fs = Fs::default();
    let mut steps = || -> Result<(usize, usize), FsError> {
        mkdir(&mut fs, "/etc")?;
        mkdir(&mut fs, "/home")?;
        mkdir(&mut fs, "/home/user")?;
        create(&mut fs, "/etc/motd")?;
        create(&mut fs, "/home/user/notes.txt")?;
        let mut written = write(&mut fs, "/etc/motd", b"welcome to ktrace\n")?;
        written += write(&mut fs, "/home/user/notes.txt", b"trace everything\n")?;
        let read_back = read(&mut fs, "/etc/motd")?.len() + read(&mut fs, "/home/user/notes.txt")?.len();
        unlink(&mut fs, "/etc/motd")?;
        if !matches!(lookup(&mut fs, "/etc/motd"), Err(FsError::NotFound)) {
            return Err(FsError::Exists);
        }
        Ok((written, read_back))
    };
    match steps() {
        Ok((written, read_back)) => {
            format!("fs: 3 directories, 2 files, {written} bytes written, {read_back} bytes read, 1 file unlinked")
        }
        Err(error) => format!("fs: failed: {error:?}"),
    }
}
