//! The document root as a path, not a descriptor fixed at start: a deploy
//! that swaps a symlink (`current -> releases/b`, Capistrano's and
//! git-sync's way) or renames a new directory into place is followed within
//! a second, as nginx follows it on its next request.
//!
//! What the root names is a [`Tree`]: its directory held open, with a generation number no other
//! tree of the process shares. A request takes the tree once
//! ([`Site::tree`](crate::site::Site::tree)) and makes every lookup of its response in it (the
//! file, `_headers`, `_redirects`, the error page), so a response is wholly of one release; a
//! response in flight keeps its file open and finishes from the tree it started in. Lookups stay
//! beneath the tree's descriptor (openat2 RESOLVE_BENEATH), so nothing outside either tree is ever
//! served.
//!
//! Each worker thread asks the file system at most once a second whether
//! the path still names the directory it holds (one stat(2)); when it does
//! not, the process opens the new one once and every thread moves to it.
//! A thread that sees a new generation empties its caches (the open-file
//! cache and its view of the root files), which only ever held the old
//! tree's lookups.

use std::cell::RefCell;
use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::sys;

/// How long a thread trusts that the root path names the tree it holds.
const FRESH_FOR: Duration = Duration::from_secs(1);

/// Generations of every tree and root in the process: one counter, so that a
/// thread serving two sites (unit tests do) never takes one's caches for
/// the other's.
static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);

fn next_generation() -> u64 {
    NEXT_GENERATION.fetch_add(1, Ordering::Relaxed)
}

/// Device and inode: what tells one directory from another.
type DirId = (u64, u64);

/// Most virtual host directories a tree holds open; past it, lookups open
/// theirs each time (as every lookup did before trees held them).
const MAX_VHOSTS: usize = 1024;

/// One directory the root named, held open, with the virtual host
/// directories (`--vhosts`) looked up in it so far.
pub struct Tree {
    fd: OwnedFd,
    id: DirId,
    generation: u64,
    /// Each virtual host's directory as first opened in this tree: every
    /// lookup of the tree's generation uses the same one, so a swap of a
    /// host's symlink cannot give a response mixed from two releases
    /// either; it makes a new tree ([`Root::follow`](crate::site::root::Root::follow)).
    vhosts: Mutex<HashMap<String, (Arc<OwnedFd>, DirId)>>,
}

impl Tree {
    fn open(path: &Path) -> std::io::Result<Tree> {
        let fd = sys::open_dir(path)?;
        let st = rustix::fs::fstat(&fd)?;
        Ok(Tree {
            fd,
            id: (st.st_dev, st.st_ino),
            generation: next_generation(),
            vhosts: Mutex::new(HashMap::new()),
        })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The directory `name` beneath the tree, as this tree first found it.
    pub fn vhost_dir(&self, name: &str) -> std::io::Result<Arc<OwnedFd>> {
        if let Some((fd, _)) = self.held_vhosts().get(name) {
            return Ok(Arc::clone(fd));
        }
        let fd = Arc::new(sys::open_dir_beneath(self.fd(), name.as_bytes())?);
        let st = rustix::fs::fstat(&*fd)?;
        let mut held = self.held_vhosts();
        if held.len() < MAX_VHOSTS {
            // A thread that opened it meanwhile wins: one directory a name.
            let entry = held.entry(name.to_string());
            let (fd, _) = entry.or_insert((fd, (st.st_dev, st.st_ino)));
            return Ok(Arc::clone(fd));
        }
        Ok(fd)
    }

    fn held_vhosts(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Arc<OwnedFd>, DirId)>> {
        self.vhosts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a virtual host name this tree holds names another directory
    /// (or none) now.
    fn vhosts_moved(&self) -> bool {
        let held = self.held_vhosts();
        held.iter().any(|(name, (_, id))| {
            let now = sys::open_dir_beneath(self.fd(), name.as_bytes())
                .and_then(|fd| Ok(rustix::fs::fstat(&fd)?));
            now.map_or(true, |st| (st.st_dev, st.st_ino) != *id)
        })
    }

    /// Unique in the process: a new tree, a new number.
    pub fn generation(&self) -> u64 {
        self.generation
    }
}

/// The root path and the tree it named when last asked.
pub struct Root {
    path: PathBuf,
    /// The tree every thread moves to once it sees the path changed.
    current: Mutex<Arc<Tree>>,
    /// `current`'s generation: once one thread has seen the change, the
    /// others move on their next request (one atomic load each) rather than
    /// at their own next look, so no client sees release b, then a again.
    latest: AtomicU64,
    /// Which root a thread's view belongs to.
    key: u64,
}

/// A thread's view of one root: when it last asked, and what it holds.
struct Seen {
    root: u64,
    checked: Instant,
    tree: Arc<Tree>,
}

thread_local! {
    static SEEN: RefCell<Option<Seen>> = const { RefCell::new(None) };
}

impl Root {
    /// Opens the tree [`path`](crate::site::path) names now.
    pub fn open(path: &Path) -> std::io::Result<Root> {
        let tree = Tree::open(path)?;
        Ok(Root {
            path: path.to_path_buf(),
            latest: AtomicU64::new(tree.generation),
            current: Mutex::new(Arc::new(tree)),
            key: next_generation(),
        })
    }

    /// Runs `f` with the tree a request is served from. Asks the file
    /// system at most once a second per thread; `moved` is called when this
    /// thread moves to a newer tree (its caches are the old tree's). The
    /// tree is lent from the thread's view, not cloned: an Arc's count
    /// shared by every worker thread would bounce between their caches on
    /// every request.
    pub fn with_tree<R>(
        &self,
        now: Instant,
        moved: impl FnOnce(),
        f: impl FnOnce(&Tree) -> R,
    ) -> R {
        SEEN.with(|seen| {
            let up_to_date = seen.borrow().as_ref().is_some_and(|s| {
                s.root == self.key
                    && s.tree.generation == self.latest.load(Ordering::Acquire)
                    && now.duration_since(s.checked) < FRESH_FOR
            });
            if !up_to_date {
                match seen.try_borrow_mut() {
                    Ok(mut view) => self.refresh(&mut view, now, moved),
                    // Asked from inside `f` of another root: no view to
                    // change while it is lent; the shared tree will do.
                    Err(_) => return f(&self.follow(&self.shared())),
                }
            }
            let view = seen.borrow();
            match view.as_ref() {
                Some(s) => f(&s.tree),
                None => f(&self.shared()),
            }
        })
    }

    /// The tree a request is served from, as [`Root::with_tree`] finds it,
    /// for a caller that must keep it.
    pub fn tree(&self, now: Instant, moved: impl FnOnce()) -> Arc<Tree> {
        self.with_tree(now, moved, |_| ());
        SEEN.with(|seen| match seen.borrow().as_ref() {
            Some(s) if s.root == self.key => Arc::clone(&s.tree),
            _ => self.shared(),
        })
    }

    /// Brings this thread's view up to date: the newest tree if another
    /// thread moved already, else what the path names now.
    fn refresh(&self, view: &mut Option<Seen>, now: Instant, moved: impl FnOnce()) {
        match view.as_mut().filter(|s| s.root == self.key) {
            Some(s) => {
                let tree = if s.tree.generation != self.latest.load(Ordering::Acquire) {
                    self.shared()
                } else {
                    s.checked = now;
                    self.follow(&s.tree)
                };
                if tree.generation != s.tree.generation {
                    s.tree = tree;
                    moved();
                }
            }
            None => {
                *view = Some(Seen {
                    root: self.key,
                    checked: now,
                    tree: self.follow(&self.shared()),
                });
                moved();
            }
        }
    }

    fn shared(&self) -> Arc<Tree> {
        Arc::clone(&self.current.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The tree the path names now: `held` when it is the same directory,
    /// else the process's newest, opening it if no thread has yet. When the
    /// path cannot be followed now (missing between two renames, out of
    /// descriptors), `held` stays in use and the next check tries again.
    fn follow(&self, held: &Arc<Tree>) -> Arc<Tree> {
        let Ok(st) = rustix::fs::stat(&self.path) else {
            return Arc::clone(held);
        };
        let root_moved = (st.st_dev, st.st_ino) != held.id;
        if !root_moved && !held.vhosts_moved() {
            return Arc::clone(held);
        }
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        // Another thread may have moved on already; else this one does.
        if current.generation == held.generation {
            match Tree::open(&self.path) {
                Ok(tree) => {
                    let what = if root_moved {
                        "root"
                    } else {
                        "a site's directory in root"
                    };
                    eprintln!(
                        "staticd: {what} {} names another directory now: serving it",
                        self.path.display()
                    );
                    self.latest.store(tree.generation, Ordering::Release);
                    *current = Arc::new(tree);
                }
                Err(_) => return Arc::clone(held),
            }
        }
        Arc::clone(&current)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_swapped_symlink_is_followed_after_a_second() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, link) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("cur"),
        );
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        std::os::unix::fs::symlink(&a, &link).unwrap();
        let root = Root::open(&link).unwrap();
        let start = Instant::now();
        let mut moves = 0;
        let first = root.tree(start, || moves += 1);
        assert_eq!(moves, 1, "a thread's first look empties its caches");
        let tmp = dir.path().join("cur.new");
        std::os::unix::fs::symlink(&b, &tmp).unwrap();
        std::fs::rename(&tmp, &link).unwrap();
        let soon = root.tree(start + Duration::from_millis(500), || moves += 1);
        assert_eq!(
            soon.generation(),
            first.generation(),
            "trusted for a second"
        );
        let later = root.tree(start + FRESH_FOR, || moves += 1);
        assert_ne!(later.generation(), first.generation());
        assert_eq!(moves, 2);
        let st = rustix::fs::fstat(later.fd()).unwrap();
        let b_st = std::fs::metadata(&b).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!((st.st_dev, st.st_ino), (b_st.dev(), b_st.ino()));
        // Unchanged: the same tree, no move.
        let again = root.tree(start + FRESH_FOR * 2, || moves += 1);
        assert_eq!(again.generation(), later.generation());
        assert_eq!(moves, 2);
    }
}
