//! The back-ends a workload can name, and the facts about each that the rest of iocurve acts
//! on: one row per back-end in [`REGISTRY`]. Nothing outside this module and the engine's
//! `backend` module (which moves the I/O and probes the host) tells back-ends apart by name —
//! code asks a back-end for the fact it needs (a test holds that line).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", try_from = "String")]
pub enum Backend {
    IoUring,
    Libaio,
    Psync,
    Null,
}

/// How a back-end uses threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadModel {
    /// One thread per outstanding I/O: each blocks in its system call (psync).
    PerIo,
    /// The workers' I/Os multiplexed onto a few threads (`threads`, default one per core).
    Shared,
}

/// What a back-end is: its row in [`REGISTRY`].
#[derive(Debug, Clone, Copy)]
pub struct Facts {
    pub kind: Backend,
    /// The name plans, flags, JSON and agents use.
    pub name: &'static str,
    /// Other spellings a plan or flag may use.
    pub aliases: &'static [&'static str],
    /// How it is described where a run says which back-end ran.
    pub described: &'static str,
    /// Reads and writes the targets: false for a back-end that completes every I/O at once
    /// without touching storage (it measures iocurve itself, and needs no filled data).
    pub touches_storage: bool,
    /// Each outstanding I/O has an aligned buffer of its own: false where the I/Os of a
    /// thread share one (nothing is transferred).
    pub buffer_per_io: bool,
    pub threads: ThreadModel,
    /// Each I/O thread holds a file descriptor of its own (a ring), counted against
    /// RLIMIT_NOFILE before a run.
    pub descriptor_per_thread: bool,
    /// The host may lack it (kernel, sysctl, seccomp policy): the engine probes it, and a
    /// workload that asks for it where it is missing runs on this back-end instead, said so.
    /// None: always there.
    pub fallback: Option<Backend>,
    /// fio's `ioengine` names it stands for in an imported job file.
    pub fio_engines: &'static [&'static str],
    /// Asynchronous only with O_DIRECT: buffered, each I/O is done inside the submission, one
    /// after the other, and the queue depth is nominal (Linux's native AIO).
    pub direct_only: bool,
    /// Each I/O thread holds a native AIO context whose slots count against the kernel's
    /// `fs.aio-max-nr`, checked before a step.
    pub aio_context: bool,
}

pub const REGISTRY: &[Facts] = &[
    Facts {
        kind: Backend::IoUring,
        name: "io_uring",
        aliases: &["io-uring", "iouring"],
        described: "io_uring, a ring per I/O thread",
        touches_storage: true,
        buffer_per_io: true,
        threads: ThreadModel::Shared,
        descriptor_per_thread: true,
        fallback: Some(Backend::Psync),
        fio_engines: &["io_uring"],
        direct_only: false,
        aio_context: false,
    },
    Facts {
        kind: Backend::Libaio,
        name: "libaio",
        aliases: &[],
        described: "Linux native AIO (io_submit), a context per I/O thread",
        touches_storage: true,
        buffer_per_io: true,
        threads: ThreadModel::Shared,
        descriptor_per_thread: false,
        fallback: Some(Backend::Psync),
        fio_engines: &["libaio"],
        direct_only: true,
        aio_context: true,
    },
    Facts {
        kind: Backend::Psync,
        name: "psync",
        aliases: &[],
        described: "psync, one thread per outstanding I/O",
        touches_storage: true,
        buffer_per_io: true,
        threads: ThreadModel::PerIo,
        descriptor_per_thread: false,
        fallback: None,
        fio_engines: &["psync", "sync", "pvsync", "pvsync2", "vsync"],
        direct_only: false,
        aio_context: false,
    },
    Facts {
        kind: Backend::Null,
        name: "null",
        aliases: &[],
        described: "null, no I/O at all",
        touches_storage: false,
        buffer_per_io: false,
        threads: ThreadModel::Shared,
        descriptor_per_thread: false,
        fallback: None,
        fio_engines: &["null"],
        direct_only: false,
        aio_context: false,
    },
];

impl Backend {
    /// Every back-end, in the registry's order.
    pub fn all() -> impl Iterator<Item = Backend> {
        REGISTRY.iter().map(|f| f.kind)
    }

    pub fn facts(self) -> &'static Facts {
        REGISTRY.iter().find(|f| f.kind == self).expect("every back-end is registered (tested)")
    }

    pub fn name(self) -> &'static str {
        self.facts().name
    }

    pub fn touches_storage(self) -> bool {
        self.facts().touches_storage
    }

    pub fn parse(s: &str) -> Option<Backend> {
        REGISTRY.iter().find(|f| f.name == s || f.aliases.contains(&s)).map(|f| f.kind)
    }

    /// The back-end an fio job's `ioengine` names, if iocurve has it.
    pub fn of_fio(engine: &str) -> Option<Backend> {
        REGISTRY.iter().find(|f| f.fio_engines.contains(&engine)).map(|f| f.kind)
    }

    /// "io_uring, libaio, psync or null".
    pub fn choices() -> String {
        let names: Vec<&str> = REGISTRY.iter().map(|f| f.name).collect();
        match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.join(""),
        }
    }
}

/// Plan files, flags and agent requests name back-ends as `parse` reads them, with one error
/// message.
impl TryFrom<String> for Backend {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        Backend::parse(&s).ok_or_else(|| format!("unknown back-end `{s}`: use {}", Backend::choices()))
    }
}

/// Which back-ends a host lacks, and why (what the engine's probe said). Every host —
/// the local one and each agent — has one; [`Availability::resolve`] says what a workload
/// asking for a back-end runs on there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Availability {
    missing: Vec<(Backend, String)>,
}

impl Availability {
    /// Everything is there.
    pub fn everything() -> Availability {
        Availability::default()
    }

    /// `missing`: each back-end this host lacks, with why. A back-end that cannot be missing
    /// (no fallback) is ignored.
    pub fn lacking(missing: impl IntoIterator<Item = (Backend, String)>) -> Availability {
        let mut missing: Vec<(Backend, String)> =
            missing.into_iter().filter(|(b, _)| b.facts().fallback.is_some()).collect();
        missing.sort_by_key(|m| m.0);
        missing.dedup_by_key(|m| m.0);
        Availability { missing }
    }

    /// Why `b` cannot run here, if it cannot.
    pub fn why_not(&self, b: Backend) -> Option<&str> {
        self.missing.iter().find(|m| m.0 == b).map(|m| m.1.as_str())
    }

    /// Each missing back-end and why.
    pub fn missing(&self) -> &[(Backend, String)] {
        &self.missing
    }

    /// The back-end a workload asking for `b` runs on this host: `b`, or its fallback where
    /// `b` is missing, with the sentence that says so (`place`: "here", "on this agent").
    pub fn resolve_at(&self, b: Backend, place: &str) -> (Backend, Option<String>) {
        let mut now = b;
        let mut why = None;
        while let Some(w) = self.why_not(now) {
            why.get_or_insert_with(|| w.to_string());
            match now.facts().fallback {
                Some(f) if f != b => now = f,
                _ => break,
            }
        }
        let note = why.filter(|_| now != b).map(|why| {
            format!("{} is not available {place} ({why}): falling back to {}", b.name(), now.facts().described)
        });
        (now, note)
    }

    /// The sentence of every back-end in `asked` that runs on its fallback at `place`, each
    /// once, in the order first asked.
    pub fn notes_at(&self, asked: impl IntoIterator<Item = Backend>, place: &str) -> Vec<String> {
        let mut notes: Vec<String> = Vec::new();
        for note in asked.into_iter().filter_map(|b| self.resolve_at(b, place).1) {
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
        notes
    }

    /// [`Availability::resolve_at`] on the local host.
    pub fn resolve(&self, b: Backend) -> (Backend, Option<String>) {
        self.resolve_at(b, "here")
    }

    /// The back-end `b` runs on here is `b` itself.
    pub fn runs(&self, b: Backend) -> bool {
        self.resolve(b).0 == b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_back_end_is_registered_once_and_round_trips() {
        for b in [Backend::IoUring, Backend::Libaio, Backend::Psync, Backend::Null] {
            assert_eq!(REGISTRY.iter().filter(|f| f.kind == b).count(), 1, "{b:?}");
            assert_eq!(Backend::parse(b.name()), Some(b));
            let json = serde_json::to_string(&b).unwrap();
            assert_eq!(json, format!("\"{}\"", b.name()));
            // A fallback is always there itself.
            if let Some(f) = b.facts().fallback {
                assert_eq!(f.facts().fallback, None, "{b:?}");
            }
        }
        assert_eq!(Backend::parse("aio"), None, "posixaio or libaio? say which");
        assert_eq!(Backend::parse("iouring"), Some(Backend::IoUring));
        assert_eq!(Backend::of_fio("libaio"), Some(Backend::Libaio));
        assert_eq!(Backend::of_fio("pvsync2"), Some(Backend::Psync));
        assert_eq!(Backend::of_fio("posixaio"), None);
        assert_eq!(Backend::choices(), "io_uring, libaio, psync or null");
        let e = Backend::try_from("spdk".to_string()).unwrap_err();
        assert_eq!(e, "unknown back-end `spdk`: use io_uring, libaio, psync or null");
    }

    #[test]
    fn a_missing_back_end_falls_back_and_says_why() {
        let here = Availability::lacking([
            (Backend::IoUring, "Operation not permitted (os error 1)".to_string()),
            (Backend::Psync, "ignored: psync cannot be missing".to_string()),
        ]);
        assert_eq!(here.resolve(Backend::Libaio), (Backend::Libaio, None));
        assert!(here.runs(Backend::Psync));
        let (b, note) = here.resolve(Backend::IoUring);
        assert_eq!(b, Backend::Psync);
        assert_eq!(
            note.unwrap(),
            "io_uring is not available here (Operation not permitted (os error 1)): falling back to psync, one thread per outstanding I/O"
        );
        let notes = here.notes_at([Backend::IoUring, Backend::Psync, Backend::IoUring], "here");
        assert_eq!(notes.len(), 1, "one note per missing back-end: {notes:?}");
        let (_, note) = here.resolve_at(Backend::IoUring, "on this agent");
        assert!(note.unwrap().starts_with("io_uring is not available on this agent ("));
        assert!(!here.runs(Backend::IoUring));
        assert_eq!(Availability::everything().resolve(Backend::IoUring), (Backend::IoUring, None));
    }

    /// Buffered libaio is synchronous: refused with the way out, where the plan says it.
    #[test]
    fn buffered_libaio_is_refused_where_the_plan_says_it() {
        let ok = "[[workloads]]\nname = \"w\"\nbackend = \"libaio\"\n";
        let p = crate::parse_str(ok, "plan.toml", &Default::default()).unwrap();
        assert_eq!(p.workloads[0].backend, Backend::Libaio);
        let bad = "[[workloads]]\nname = \"w\"\nbackend = \"libaio\"\ndirect = false\n";
        let e = crate::parse_str(bad, "plan.toml", &Default::default()).unwrap_err().to_string();
        assert!(e.contains("plan.toml") && e.contains("libaio is asynchronous only with O_DIRECT"), "{e}");
        assert!(e.contains("use io_uring or psync for buffered I/O"), "{e}");
    }

    /// A back-end told apart by its name on this line of code: compared (`== Backend::Null`,
    /// `Backend::Null != b`), matched (`Backend::Null =>`, `matches!(b, Backend::Null)`,
    /// `if let Backend::Null`). `Backend::`, not `UringBackend::` and the like.
    fn names_by_name(code: &str) -> bool {
        code.match_indices("Backend::").any(|(i, _)| {
            let before = &code[..i];
            if before.ends_with(|c: char| c.is_alphanumeric() || c == '_') && !before.ends_with("::") {
                return false;
            }
            // The path in front (`iocurve_plan::`, `crate::model::`) is part of the name.
            let head = before.trim_end_matches(|c: char| c.is_alphanumeric() || c == '_' || c == ':').trim_end();
            let rest = code[i + "Backend::".len()..].trim_start_matches(|c: char| c.is_alphanumeric() || c == '_');
            let after = rest.trim_start();
            head.ends_with("==")
                || head.ends_with("!=")
                || head.contains("matches!(")
                || head.ends_with("if let")
                || head.ends_with("while let")
                || after.starts_with("==")
                || after.starts_with("!=")
                || after.starts_with("=>")
                || after.starts_with('|')
        })
    }

    #[test]
    fn comparisons_by_name_are_found() {
        for bad in [
            "if w.backend == Backend::Null {",
            "b != iocurve_plan::Backend::IoUring",
            "Backend::Null == b",
            "Backend::Psync => 1,",
            "matches!(b, Backend::Null | Backend::Psync)",
            "if let Backend::Null = b {",
            "x == crate::model::Backend::Null",
        ] {
            assert!(names_by_name(bad), "{bad}");
        }
        for fine in [
            "None if job.ioengine == \"posixaio\" => (Backend::IoUring, true),",
            "let b = FaultBackend::new(x);",
            "assert_eq!(w.backend, Backend::Libaio);",
            "step_memory(&w, 1, Backend::IoUring)",
        ] {
            assert!(!names_by_name(fine), "{fine}");
        }
    }

    /// Issue 38, part 3: back-ends are told apart by their facts, not by name, outside this
    /// module and the engine's `backend` module.
    #[test]
    fn no_back_end_is_compared_by_name_outside_its_modules() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut offenders = Vec::new();
        let mut stack = vec![root.join("crates"), root.join("fuzz/fuzz_targets")];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for e in entries.flatten() {
                let p = e.path();
                let s = p.to_string_lossy().replace('\\', "/");
                let name = p.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
                if p.is_dir() {
                    // Build output, and the engine's back-end module itself.
                    if name != "target" && !s.ends_with("engine/src/backend") {
                        stack.push(p);
                    }
                    continue;
                }
                if !s.ends_with(".rs") || s.ends_with("plan/src/backend.rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                for (n, line) in text.lines().enumerate() {
                    let code = line.split("//").next().unwrap_or("");
                    if names_by_name(code) {
                        offenders.push(format!("{s}:{}: {}", n + 1, line.trim()));
                    }
                }
            }
        }
        assert!(offenders.is_empty(), "ask the back-end for the fact instead:\n{}", offenders.join("\n"));
    }
}
