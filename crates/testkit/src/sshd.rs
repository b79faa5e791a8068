//! Hosts reached over real OpenSSH: an `sshd` (Debian's openssh-server) in a network namespace
//! of its own per host, with generated host and user keys, and the ssh configuration a
//! coordinator uses for them (`run --launch ssh --ssh "ssh -F …"`). Each host's sshd gives its
//! sessions a TMPDIR of their own, so that what a launch leaves on a host can be found.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::cluster::Netns;

/// Namespaces of ssh hosts made by this test process so far: each gets a network of its own.
static SLOT: AtomicU32 = AtomicU32::new(1);

pub struct SshHost {
    pub ns: Netns,
    sshd: Child,
    /// The host's address, as `--hosts` names it.
    pub addr: String,
    /// Its IPv6 address (fd77:SLOT::2).
    pub addr6: String,
    /// TMPDIR of its sessions: where a launch copies the binary.
    pub tmp: PathBuf,
}

impl SshHost {
    /// The host stays, its sshd goes: connections to it are refused.
    pub fn stop_sshd(&mut self) {
        let _ = self.sshd.kill();
        let _ = self.sshd.wait();
    }
}

impl Drop for SshHost {
    fn drop(&mut self) {
        let _ = self.sshd.kill();
        let _ = self.sshd.wait();
    }
}

/// Several ssh hosts and the configuration that reaches them.
pub struct SshLab {
    pub dir: tempfile::TempDir,
    pub hosts: Vec<SshHost>,
}

fn keygen(path: &Path) {
    let o = Command::new("ssh-keygen").args(["-q", "-t", "ed25519", "-N", ""]).arg("-f").arg(path).output().unwrap();
    assert!(o.status.success(), "ssh-keygen: {}", String::from_utf8_lossy(&o.stderr));
}

impl SshLab {
    pub fn new(n: usize) -> SshLab {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        keygen(&d.join("hostkey"));
        keygen(&d.join("userkey"));
        std::fs::copy(d.join("userkey.pub"), d.join("authorized_keys")).unwrap();
        std::fs::create_dir_all("/run/sshd").unwrap(); // sshd's privilege separation directory
        let host_pub = std::fs::read_to_string(d.join("hostkey.pub")).unwrap();
        let host_pub: Vec<&str> = host_pub.split_whitespace().take(2).collect();
        let id = std::process::id() % 10_000;
        let mut hosts = Vec::new();
        let mut known = String::new();
        for i in 0..n {
            let slot = SLOT.fetch_add(1, Ordering::SeqCst);
            assert!(slot < 250, "more ssh hosts than the networks of one test process");
            let ns = Netns::with_net(&format!("{id}s{slot}"), &format!("10.{}.{slot}", 78 + id % 8));
            // IPv6 beside IPv4 (nodad: usable at once, without duplicate detection's wait).
            let net6 = format!("fd77:{}:{slot}", 78 + id % 8);
            super::cluster::ip(&["-6", "addr", "add", &format!("{net6}::1/64"), "dev", &ns.outer, "nodad"]);
            super::cluster::ip(&[
                "netns",
                "exec",
                &ns.name,
                "ip",
                "-6",
                "addr",
                "add",
                &format!("{net6}::2/64"),
                "dev",
                &format!("iv{id}s{slot}i"),
                "nodad",
            ]);
            let addr6 = format!("{net6}::2");
            let tmp = d.join(format!("host{i}-tmp"));
            std::fs::create_dir(&tmp).unwrap();
            let conf = d.join(format!("sshd{i}.conf"));
            std::fs::write(
                &conf,
                format!(
                    "ListenAddress {addr}:22\nListenAddress [{addr6}]:22\nHostKey {hk}\nAuthorizedKeysFile {ak}\nStrictModes no\n\
                     PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                     UsePAM no\nPidFile none\nMaxStartups 100\nSetEnv TMPDIR={tmp}\n",
                    addr = ns.addr,
                    hk = d.join("hostkey").display(),
                    ak = d.join("authorized_keys").display(),
                    tmp = tmp.display()
                ),
            )
            .unwrap();
            let sshd = Command::new("ip")
                .args(["netns", "exec", &ns.name, "/usr/sbin/sshd", "-D", "-f"])
                .arg(&conf)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("sshd starts (Debian openssh-server)");
            known.push_str(&format!("{} {} {}\n", ns.addr, host_pub[0], host_pub[1]));
            known.push_str(&format!("{addr6} {} {}\n", host_pub[0], host_pub[1]));
            hosts.push(SshHost { addr: ns.addr.clone(), addr6, ns, sshd, tmp });
        }
        std::fs::write(d.join("known_hosts"), known).unwrap();
        std::fs::write(
            d.join("ssh_config"),
            format!(
                "Host *\n  User root\n  IdentityFile {}\n  IdentitiesOnly yes\n  UserKnownHostsFile {}\n  StrictHostKeyChecking yes\n  LogLevel ERROR\n",
                d.join("userkey").display(),
                d.join("known_hosts").display()
            ),
        )
        .unwrap();
        let lab = SshLab { dir, hosts };
        for h in &lab.hosts {
            let until = Instant::now() + Duration::from_secs(10);
            while std::net::TcpStream::connect_timeout(
                &format!("{}:22", h.addr).parse().unwrap(),
                Duration::from_secs(1),
            )
            .is_err()
            {
                assert!(Instant::now() < until, "sshd on {} listens within 10 s", h.addr);
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        lab
    }

    /// The `--ssh` command that reaches the lab's hosts.
    pub fn ssh(&self) -> String {
        format!("ssh -F {}", self.dir.path().join("ssh_config").display())
    }

    /// What a launch left: files in any host's TMPDIR, and processes of launched agents whose
    /// command line names this lab (its copies, its targets).
    pub fn leftovers(&self) -> Vec<String> {
        let mut left = Vec::new();
        for h in &self.hosts {
            for e in std::fs::read_dir(&h.tmp).unwrap() {
                left.push(e.unwrap().path().display().to_string());
            }
        }
        left.extend(launched_agents(self.dir.path()));
        left
    }

    /// The hosts reach one another through this host, as hosts of one network do (a relay
    /// dials the agents of its group): a default route in each, and forwarding on here until
    /// the guard goes.
    pub fn routed(&self) -> Forwarding {
        for h in &self.hosts {
            let gateway = format!("{}.1", h.addr.rsplit_once('.').expect("an IPv4 address").0);
            super::cluster::ip(&["netns", "exec", &h.ns.name, "ip", "route", "add", "default", "via", &gateway]);
        }
        let old = std::fs::read_to_string(FORWARDING).unwrap_or_else(|_| "0".into());
        std::fs::write(FORWARDING, "1").expect("forwarding turned on");
        Forwarding(old)
    }

    /// Waits (at most `within`) until nothing is left; what is left then.
    pub fn wait_clean(&self, within: Duration) -> Vec<String> {
        let until = Instant::now() + within;
        loop {
            let left = self.leftovers();
            if left.is_empty() || Instant::now() >= until {
                return left;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

const FORWARDING: &str = "/proc/sys/net/ipv4/ip_forward";

/// IPv4 forwarding as it was before [`SshLab::routed`], put back on drop.
pub struct Forwarding(String);

impl Drop for Forwarding {
    fn drop(&mut self) {
        let _ = std::fs::write(FORWARDING, self.0.trim());
    }
}

/// Processes running `agent --launched` whose command line mentions `dir`.
pub fn launched_agents(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let needle = dir.display().to_string();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else { continue };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(" agent --launched") && cmd.contains(&needle) {
            found.push(format!("process {}: {cmd}", e.file_name().to_string_lossy()));
        }
    }
    found
}
