//! Process-wide memory settings the binaries apply before they start work.

/// Turns transparent huge pages off for this process (Linux; elsewhere a
/// no-op), as Redis and most databases advise. mimalloc asks for huge pages
/// on its arenas and returns freed memory to the OS after 10 ms; with huge
/// pages every page it then touches again is a 2 MiB fault that the kernel
/// zeroes on the faulting thread. In `taskyard bench` that zeroing was ~28%
/// of the coordinator thread's CPU, on the path of every answer; with huge
/// pages off the drain rate rose by 4–13% (docs/performance-log.md). Returns whether
/// the kernel accepted the setting; nothing else depends on it. Children
/// inherit the setting; the `exec` task gives its programs the system's
/// back (`allow_transparent_huge_pages`).
pub fn disable_transparent_huge_pages() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_SET_THP_DISABLE takes plain integers and only sets a
        // flag on this process's memory map.
        unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// Undoes [`disable_transparent_huge_pages`] for the calling process: the
/// system's setting applies again. Only makes one system call, so it may
/// run between `fork` and `exec`.
pub fn allow_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: as above; prctl is async-signal-safe.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 0, 0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_os = "linux")]
    #[test]
    fn huge_pages_are_off_once_disabled() {
        assert!(super::disable_transparent_huge_pages());
        // SAFETY: PR_GET_THP_DISABLE takes plain integers and reads a flag.
        let flag = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
        assert_eq!(flag, 1);
    }
}
