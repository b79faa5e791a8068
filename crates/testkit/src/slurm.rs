//! A real single-node Slurm for the tests: Debian's slurm-wlm, slurmctld and slurmd started
//! in the foreground with a generated configuration on free ports, authenticated by a munged of
//! their own (its own key and socket), all stopped on drop. Commands run against it with
//! `SLURM_CONF` pointing at its configuration.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct SlurmLab {
    pub dir: tempfile::TempDir,
    pub conf: PathBuf,
    pub node: String,
    daemons: Vec<Child>,
}

impl Drop for SlurmLab {
    fn drop(&mut self) {
        for d in self.daemons.iter_mut().rev() {
            let _ = d.kill();
            let _ = d.wait();
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn daemon(cmd: &mut Command) -> Child {
    cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap_or_else(|e| panic!("{cmd:?} starts: {e}"))
}

impl SlurmLab {
    /// One node (this host, by its short name) with `cpus` CPUs declared, in partition `test`.
    pub fn new(cpus: u32) -> SlurmLab {
        SlurmLab::start(cpus, false)
    }

    /// [`SlurmLab::new`] with a tree topology: the node behind leaf switch `leaf0`, under
    /// `spine` (TopologyPlugin=topology/tree and a topology.conf beside slurm.conf).
    pub fn with_topology(cpus: u32) -> SlurmLab {
        SlurmLab::start(cpus, true)
    }

    fn start(cpus: u32, topology: bool) -> SlurmLab {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let node =
            String::from_utf8(Command::new("hostname").arg("-s").output().unwrap().stdout).unwrap().trim().to_string();
        for sub in ["state", "spool", "munge"] {
            std::fs::create_dir(d.join(sub)).unwrap();
        }
        let key = d.join("munge/munge.key");
        std::fs::write(&key, (0..128u8).map(|i| i.wrapping_mul(37).wrapping_add(11)).collect::<Vec<u8>>()).unwrap();
        std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        let socket = d.join("munge/munge.socket");
        let mut daemons = vec![daemon(
            Command::new("munged")
                .args(["-F", "--force"])
                .arg(format!("--socket={}", socket.display()))
                .arg(format!("--key-file={}", key.display()))
                .arg(format!("--pid-file={}", d.join("munge/munged.pid").display()))
                .arg(format!("--log-file={}", d.join("munge/munged.log").display()))
                .arg(format!("--seed-file={}", d.join("munge/munged.seed").display())),
        )];
        let until = Instant::now() + Duration::from_secs(10);
        while !socket.exists() {
            assert!(Instant::now() < until, "munged makes its socket within 10 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        let conf = d.join("slurm.conf");
        let p = |s: &str| d.join(s).display().to_string();
        let tree = if topology {
            std::fs::write(
                d.join("topology.conf"),
                format!("SwitchName=leaf0 Nodes={node}\nSwitchName=spine Switches=leaf0\n"),
            )
            .unwrap();
            "TopologyPlugin=topology/tree\n"
        } else {
            ""
        };
        std::fs::write(
            &conf,
            format!(
                "ClusterName=iocurvetest\nSlurmctldHost={node}(127.0.0.1)\nSlurmUser=root\nSlurmdUser=root\n\
                 AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket={socket}\n\
                 StateSaveLocation={state}\nSlurmdSpoolDir={spool}\n\
                 SlurmctldPidFile={ctldpid}\nSlurmdPidFile={dpid}\nSlurmctldLogFile={ctldlog}\nSlurmdLogFile={dlog}\n\
                 SlurmctldPort={cport}\nSlurmdPort={dport}\n\
                 ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSelectType=select/cons_tres\n\
                 SelectTypeParameters=CR_Core\nSlurmdParameters=config_overrides\nReturnToService=2\nMpiDefault=none\n\
                 SchedulerType=sched/builtin\nJobCompType=jobcomp/none\nAccountingStorageType=accounting_storage/none\n\
                 NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=1000 State=UNKNOWN\n\
                 PartitionName=test Nodes={node} Default=YES MaxTime=INFINITE State=UP\n{tree}",
                socket = socket.display(),
                state = p("state"),
                spool = p("spool"),
                ctldpid = p("slurmctld.pid"),
                dpid = p("slurmd.pid"),
                ctldlog = p("slurmctld.log"),
                dlog = p("slurmd.log"),
                cport = free_port(),
                dport = free_port(),
            ),
        )
        .unwrap();
        daemons.push(daemon(Command::new("slurmctld").args(["-D", "-i", "-f"]).arg(&conf)));
        daemons.push(daemon(Command::new("slurmd").args(["-D", "-f"]).arg(&conf)));
        let lab = SlurmLab { dir, conf, node, daemons };
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let o = lab.command("sinfo").args(["-h", "-o", "%T"]).output().unwrap();
            if String::from_utf8_lossy(&o.stdout).trim() == "idle" {
                break;
            }
            assert!(
                Instant::now() < until,
                "the Slurm node is idle within 30 s: {} {}\n{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr),
                std::fs::read_to_string(lab.dir.path().join("slurmctld.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        lab
    }

    /// A Slurm command (srun, salloc, sinfo …) against this lab.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", &self.conf);
        c
    }

    /// The jobs still known (running or pending), one line each.
    pub fn jobs(&self) -> Vec<String> {
        let o = self.command("squeue").args(["-h", "-o", "%i %j %T"]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).lines().map(String::from).collect()
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}
