//! Another process as a message names it.

use std::path::Path;

/// The command line of process `pid` on this host, as one line: the program's file name and
/// its arguments, control characters replaced (another process's words must not steer a
/// terminal), at most 400 characters. None when there is no such process (or it has none).
pub fn command_line(pid: u32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok().filter(|c| !c.is_empty())?;
    let mut words = raw
        .split(|&b| b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).chars().map(|c| if c.is_control() { '?' } else { c }).collect::<String>());
    let prog = words.next().map(|p| Path::new(&p).file_name().map_or(p.clone(), |n| n.to_string_lossy().into()));
    let line = prog.into_iter().chain(words).collect::<Vec<_>>().join(" ");
    Some(if line.chars().count() > 400 { line.chars().take(400).collect::<String>() + "…" } else { line })
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_is_named_by_its_program_and_arguments() {
        let me = super::command_line(std::process::id()).unwrap();
        let exe = std::env::args().next().unwrap();
        let name = std::path::Path::new(&exe).file_name().unwrap().to_string_lossy().into_owned();
        assert!(me.starts_with(&name), "{me}");
        assert_eq!(super::command_line(u32::MAX), None);
    }
}
