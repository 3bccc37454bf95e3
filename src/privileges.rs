//! Giving up root after binding: chroot, then the user's group and uid.

use std::ffi::CString;
use std::io;
use std::path::Path;

use crate::config::Privileges;
use crate::sys::describe;

/// Gives up what `p` says to: looks the names up, then chroot, then the
/// group and user.
pub fn apply(p: &Privileges) -> Result<(), String> {
    // Names are looked up before chroot hides /etc/passwd.
    let identity = match &p.user {
        Some(user) => Some(lookup(user, p.group.as_deref())?),
        None => None,
    };
    if let Some(dir) = &p.chroot {
        chroot(dir)?;
    }
    if let Some(id) = &identity {
        become_user(id)?;
    }
    Ok(())
}

/// The identity to run as.
pub struct Identity {
    pub name: String,
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
}

/// Looks up a user (name or number) and optionally a group; without a
/// group, the user's primary group. Must run before chroot, which usually
/// hides /etc/passwd.
pub fn lookup(user: &str, group: Option<&str>) -> Result<Identity, String> {
    let (uid, primary_gid) = match user.parse::<libc::uid_t>() {
        Ok(uid) => (uid, None),
        Err(_) => {
            let (uid, gid) = passwd_entry(user)?;
            (uid, Some(gid))
        }
    };
    let gid = match group {
        Some(g) => match g.parse::<libc::gid_t>() {
            Ok(gid) => gid,
            Err(_) => group_entry(g)?,
        },
        None => primary_gid.unwrap_or(uid),
    };
    Ok(Identity {
        name: user.to_string(),
        uid,
        gid,
    })
}

fn passwd_entry(name: &str) -> Result<(libc::uid_t, libc::gid_t), String> {
    let cname = CString::new(name).map_err(|_| format!("user {name:?}: invalid name"))?;
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer refers to live, correctly sized storage above.
    let rc = unsafe {
        libc::getpwnam_r(
            cname.as_ptr(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        )
    };
    if rc != 0 || result.is_null() {
        return Err(format!("user {name}: no such user"));
    }
    Ok((pwd.pw_uid, pwd.pw_gid))
}

fn group_entry(name: &str) -> Result<libc::gid_t, String> {
    let cname = CString::new(name).map_err(|_| format!("group {name:?}: invalid name"))?;
    let mut grp: libc::group = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut result: *mut libc::group = std::ptr::null_mut();
    // SAFETY: as in passwd_entry.
    let rc = unsafe {
        libc::getgrnam_r(
            cname.as_ptr(),
            &mut grp,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        )
    };
    if rc != 0 || result.is_null() {
        return Err(format!("group {name}: no such group"));
    }
    Ok(grp.gr_gid)
}

/// Confines the process to `dir`.
pub fn chroot(dir: &Path) -> Result<(), String> {
    let shown = dir.display();
    std::os::unix::fs::chroot(dir).map_err(|e| format!("chroot {shown}: {}", describe(&e)))?;
    std::env::set_current_dir("/").map_err(|e| format!("chroot {shown}: {}", describe(&e)))
}

/// Switches to `id` for good: supplementary groups, gid, then uid, and
/// checks that root cannot be regained.
pub fn become_user(id: &Identity) -> Result<(), String> {
    let fail = |what: &str| {
        format!(
            "cannot switch to user {}: {what}: {}",
            id.name,
            describe(&io::Error::last_os_error())
        )
    };
    // SAFETY: plain system calls on integers; glibc applies them to every thread.
    unsafe {
        if libc::setgroups(1, &id.gid) != 0 {
            return Err(fail("setgroups"));
        }
        if libc::setgid(id.gid) != 0 {
            return Err(fail("setgid"));
        }
        if libc::setuid(id.uid) != 0 {
            return Err(fail("setuid"));
        }
        if id.uid != 0 && (libc::setuid(0) == 0 || libc::geteuid() == 0) {
            return Err(format!(
                "cannot switch to user {}: root could be regained",
                id.name
            ));
        }
    }
    Ok(())
}
