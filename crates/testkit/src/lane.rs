//! Which tests run where: a test that needs root skips, with a message, when it is not root,
//! so that an ordinary user's `cargo test` runs what it can; under `scripts/test` (CI, as root)
//! a skip is a failure, so that nothing quietly stops being tested (#34).
//!
//! The message goes straight to stderr: libtest captures only the `print!` family, and a
//! passing test's output is never shown. The same holds for a test of the fast lane that needs
//! a command an ordinary machine may lack (`needs_tool!("openssl")`).

use std::io::Write;

/// What a test needs root for, as its skip message says it.
pub const ROOT: &str = "root (loop devices, mounts, network namespaces, cgroups, the fault device)";

/// Starts a test that needs root: when the tests do not run as root, says so and returns from
/// the test; when skips are failures (`IOCURVE_NO_SKIP=1`, as `scripts/test` sets, or `CI`
/// set), fails it.
#[macro_export]
macro_rules! needs_root {
    () => {
        if !$crate::lane::is_root() {
            $crate::lane::skip($crate::lane::ROOT);
            return;
        }
    };
}

/// Starts a test that runs a command the full lane installs (`needs_tool!("openssl")`): when
/// it is not on the PATH, says so and returns from the test, or fails it as [`needs_root!`]
/// does when skips are failures.
#[macro_export]
macro_rules! needs_tool {
    ($tool:expr) => {
        if !$crate::lane::has_tool($tool) {
            $crate::lane::skip(&format!("the `{}` command (scripts/test installs it)", $tool));
            return;
        }
    };
}

/// Whether `name` is an executable file in a directory of the PATH.
pub fn has_tool(name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .any(|d| std::fs::metadata(d.join(name)).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Whether a skipped test fails: `IOCURVE_NO_SKIP=1` (scripts/test's full lane), or `CI` set
/// to anything but `false`/`0`/empty (CI services set `CI=true`).
pub fn skips_fail() -> bool {
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"));
    set("IOCURVE_NO_SKIP") || set("CI")
}

/// Records that the running test skips for want of `need`, or fails it when skips are failures.
pub fn skip(need: &str) {
    let test = std::thread::current().name().unwrap_or("a test").to_string();
    if skips_fail() {
        panic!(
            "{test} needs {need}, and a skipped test is a failure here (IOCURVE_NO_SKIP or CI is set): run the tests as root"
        );
    }
    let _ = std::io::stderr().write_all(format!("skipped {test}: needs {need}\n").as_bytes());
}

#[cfg(test)]
mod tests {
    /// The strictness switch reads as documented; a skip under it panics with the test's name.
    #[test]
    fn a_skip_is_a_failure_when_skips_fail() {
        // SAFETY: only this test in this binary touches these variables.
        unsafe {
            std::env::remove_var("CI");
            std::env::set_var("IOCURVE_NO_SKIP", "0");
        }
        assert!(!super::skips_fail());
        // SAFETY: as above.
        unsafe { std::env::set_var("CI", "true") };
        assert!(super::skips_fail());
        let err = std::thread::Builder::new()
            .name("lane::a_test".into())
            .spawn(|| super::skip(super::ROOT))
            .unwrap()
            .join()
            .expect_err("a skip under CI=true panics");
        let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.starts_with("lane::a_test needs root") && msg.contains("failure"), "{msg}");
        // SAFETY: as above.
        unsafe { std::env::remove_var("CI") };
        // Without strictness a skip returns (its line goes to stderr).
        std::thread::Builder::new().name("lane::b_test".into()).spawn(|| super::skip("fio")).unwrap().join().unwrap();
        assert!(super::has_tool("sh") && !super::has_tool("iocurve-no-such-tool"));
    }
}
