//! The front door of a listening process — the agent's port and the metrics endpoint, each with
//! a [`Door`] of its own. Until a connection is authenticated it is a stranger's, and strangers
//! get little: a bounded number at once per process ([`Limits::unauthenticated`]), per network
//! (an IPv4 /24 or an IPv6 /64, [`Limits::per_network`]) and per address
//! ([`Limits::per_address`]); a byte within [`Limits::silent`] and authentication within
//! [`Limits::first_call`], or they are cut.
//!
//! When a cap is full the newcomer is let in and a stranger is evicted instead — the oldest of
//! the same address, else of the same network, else of the network holding the most strangers;
//! of those, one that has sent nothing before one that has (a TLS client speaks first). So a
//! flood of idle connections, from however many addresses, never keeps a real client out: it
//! evicts itself, and a client from another network is evicted only by a flood bigger in its
//! own network than the client's (issue 35, finding 2: 8 addresses × 16 idle connections
//! filled the agent's 128 places and every coordinator got UNAVAILABLE).
//!
//! Cutting a connection really closes it, whoever holds it: its socket is shut for reading,
//! which wakes a reader blocked on it (a thread) or waiting for it (a task, woken also through
//! [`Ticket::watch`]), and set to linger 0, so that the close sends a reset — the client learns
//! at once that it was cut, not that the server answered with an orderly end.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;
use std::time::{Duration, Instant};

/// What a door admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections at once, authenticated or not; beyond this a newcomer is refused when there
    /// is no stranger to evict (only clients that authenticated hold them all then).
    pub connections: usize,
    /// Connections at once that are not authenticated yet.
    pub unauthenticated: usize,
    /// Of those, from one network: an IPv4 /24, an IPv6 /64.
    pub per_network: usize,
    /// Of those, from one address.
    pub per_address: usize,
    /// A stranger that has sent no byte at all within this is cut.
    pub silent: Duration,
    /// A stranger not authenticated within this is cut.
    pub first_call: Duration,
}

/// The network an address is counted in: its /24 (IPv4) or /64 (IPv6, where one host may hold
/// a whole /64). IPv4 peers of a dual-stack socket (`::ffff:a.b.c.d`) count as IPv4.
pub fn network(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(Ipv4Addr::from(u32::from(v4) & !0xff)),
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
    }
}

/// What a connection and its door share: the door cuts through it.
struct Sock {
    /// The socket while the connection holds it (cleared by [`Held`]'s drop before the socket
    /// closes, under this lock: the door never touches a descriptor number reused since).
    fd: Mutex<Option<RawFd>>,
    /// Set (under the door's lock) when the door cut the connection.
    cut: AtomicBool,
    /// The connection has sent at least one byte.
    heard: AtomicBool,
    /// The task to wake when the connection is cut (see [`Ticket::watch`]).
    waker: Mutex<Option<Waker>>,
}

impl Sock {
    fn cut_now(&self) {
        self.cut.store(true, Ordering::SeqCst);
        if let Some(fd) = *lock(&self.fd) {
            let linger = libc::linger { l_onoff: 1, l_linger: 0 };
            // SAFETY: `fd` is the connection's open socket (the lock keeps it from being
            // closed meanwhile); setsockopt and shutdown only act on it.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    libc::SO_LINGER,
                    (&linger as *const libc::linger).cast(),
                    std::mem::size_of::<libc::linger>() as libc::socklen_t,
                );
                libc::shutdown(fd, libc::SHUT_RD);
            }
        }
        if let Some(w) = lock(&self.waker).take() {
            w.wake();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

struct Stranger {
    ip: IpAddr,
    since: Instant,
    sock: Arc<Sock>,
}

impl Stranger {
    fn heard(&self) -> bool {
        self.sock.heard.load(Ordering::Relaxed)
    }
}

/// One warning per 5 s for a kind of event that may come by the thousand, with the count of
/// those not logged.
#[derive(Default)]
struct Sparse {
    last: Option<Instant>,
    quiet: u64,
}

impl Sparse {
    fn due(&mut self) -> Option<u64> {
        if self.last.is_some_and(|t| t.elapsed() < Duration::from_secs(5)) {
            self.quiet += 1;
            return None;
        }
        self.last = Some(Instant::now());
        Some(std::mem::take(&mut self.quiet))
    }
}

#[derive(Default)]
struct State {
    /// Connections admitted and neither closed nor cut.
    total: usize,
    /// The strangers by admission order: the first is the oldest.
    strangers: BTreeMap<u64, Stranger>,
    evicted: Sparse,
    silent: Sparse,
    slow: Sparse,
    refused: Sparse,
}

impl State {
    /// Cuts the stranger `seq` and gives its place back.
    fn cut(&mut self, seq: u64) -> Option<IpAddr> {
        let s = self.strangers.remove(&seq)?;
        self.total -= 1;
        s.sock.cut_now();
        Some(s.ip)
    }

    /// The stranger to evict among `candidates` (in admission order): the oldest that has sent
    /// nothing, else the oldest.
    fn pick<'a>(candidates: impl Iterator<Item = (&'a u64, &'a Stranger)> + Clone) -> Option<u64> {
        let mut all = candidates.clone();
        candidates.filter(|(_, s)| !s.heard()).map(|(&k, _)| k).next().or_else(|| all.next().map(|(&k, _)| k))
    }

    /// A stranger to evict from the network that holds the most strangers (when several hold
    /// as many, any of them).
    fn oldest_in_fullest_network(&self) -> Option<u64> {
        let mut per_net: HashMap<IpAddr, usize> = HashMap::new();
        for s in self.strangers.values() {
            *per_net.entry(network(s.ip)).or_default() += 1;
        }
        let most = per_net.values().copied().max()?;
        Self::pick(self.strangers.iter().filter(|(_, s)| per_net[&network(s.ip)] == most))
    }
}

/// The door of one listening process.
pub struct Door {
    /// How the logs name it ("agent", "metrics").
    what: &'static str,
    limits: Limits,
    next: AtomicU64,
    state: Mutex<State>,
}

/// Why a connection was cut, for the log.
#[derive(Clone, Copy)]
enum Why {
    Evicted,
    Silent,
    Slow,
}

impl Door {
    pub fn new(what: &'static str, limits: Limits) -> Arc<Door> {
        Arc::new(Door { what, limits, next: AtomicU64::new(0), state: Mutex::default() })
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    fn log(&self, st: &mut State, why: Why, peer: IpAddr) {
        let (sparse, what) = match why {
            Why::Evicted => {
                (&mut st.evicted, "connection evicted: the oldest not yet authenticated, to let a newer one in")
            }
            Why::Silent => (&mut st.silent, "connection cut: it sent nothing"),
            Why::Slow => (&mut st.slow, "connection cut: not authenticated within the deadline"),
        };
        if let Some(more) = sparse.due() {
            tracing::warn!(door = self.what, %peer, more, "{what}");
        }
    }

    /// Lets the connection `io` from `peer` in, evicting a stranger when a cap is full; None
    /// when even that leaves no room (all places held by authenticated clients): the
    /// connection is then reset and dropped.
    pub fn admit<S: AsRawFd>(self: &Arc<Self>, io: S, peer: SocketAddr) -> Option<Held<S>> {
        let ip = peer.ip().to_canonical();
        let net = network(ip);
        let l = self.limits;
        let mut st = self.state();
        let from_address = |st: &State| st.strangers.values().filter(|s| s.ip == ip).count();
        let from_network = |st: &State| st.strangers.values().filter(|s| network(s.ip) == net).count();
        let mut victims = Vec::new();
        if from_address(&st) >= l.per_address {
            victims.extend(State::pick(st.strangers.iter().filter(|(_, s)| s.ip == ip)));
        } else if from_network(&st) >= l.per_network {
            victims.extend(State::pick(st.strangers.iter().filter(|(_, s)| network(s.ip) == net)));
        } else if st.strangers.len() >= l.unauthenticated || st.total >= l.connections {
            victims.extend(st.oldest_in_fullest_network());
        }
        for v in victims {
            if let Some(ip) = st.cut(v) {
                self.log(&mut st, Why::Evicted, ip);
            }
        }
        if st.total >= l.connections
            || st.strangers.len() >= l.unauthenticated
            || from_network(&st) >= l.per_network
            || from_address(&st) >= l.per_address
        {
            if let Some(more) = st.refused.due() {
                tracing::warn!(door = self.what, %peer, more, "connection refused: every place is held by authenticated clients");
            }
            drop(st);
            let sock = Sock {
                fd: Mutex::new(Some(io.as_raw_fd())),
                cut: AtomicBool::new(false),
                heard: AtomicBool::new(false),
                waker: Mutex::new(None),
            };
            sock.cut_now();
            return None;
        }
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        let sock = Arc::new(Sock {
            fd: Mutex::new(Some(io.as_raw_fd())),
            cut: AtomicBool::new(false),
            heard: AtomicBool::new(false),
            waker: Mutex::new(None),
        });
        st.total += 1;
        st.strangers.insert(seq, Stranger { ip, since: Instant::now(), sock: sock.clone() });
        drop(st);
        let ticket = Arc::new(Ticket { door: self.clone(), peer, seq, authenticated: AtomicBool::new(false), sock });
        Some(Held { io, ticket })
    }

    /// Cuts the strangers that sent nothing within [`Limits::silent`] or were not authenticated
    /// within [`Limits::first_call`]. The server calls it a few times a second.
    pub fn sweep(&self) {
        let now = Instant::now();
        let l = self.limits;
        let mut st = self.state();
        let due: Vec<(u64, Why)> = st
            .strangers
            .iter()
            .filter_map(|(&k, s)| {
                let age = now.saturating_duration_since(s.since);
                if !s.heard() && age >= l.silent {
                    Some((k, Why::Silent))
                } else if age >= l.first_call {
                    Some((k, Why::Slow))
                } else {
                    None
                }
            })
            .collect();
        for (k, why) in due {
            if let Some(ip) = st.cut(k) {
                self.log(&mut st, why, ip);
            }
        }
    }

    /// (connections, strangers, distinct strangers' addresses) now.
    pub fn counts(&self) -> (usize, usize, usize) {
        let st = self.state();
        let addrs: std::collections::HashSet<IpAddr> = st.strangers.values().map(|s| s.ip).collect();
        (st.total, st.strangers.len(), addrs.len())
    }
}

/// A connection's place at the door, given back when the connection ends.
pub struct Ticket {
    door: Arc<Door>,
    peer: SocketAddr,
    seq: u64,
    authenticated: AtomicBool,
    sock: Arc<Sock>,
}

impl Ticket {
    /// The connection carried the right credentials: it is no longer a stranger's, and the
    /// door's caps and deadlines no longer apply to it.
    pub fn authenticated(&self) {
        if !self.authenticated.swap(true, Ordering::AcqRel) {
            // Already cut (evicted a moment before), it stays cut.
            self.door.state().strangers.remove(&self.seq);
        }
    }

    pub fn is_authenticated(&self) -> bool {
        self.authenticated.load(Ordering::Acquire)
    }

    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// The connection sent bytes: it is not silent. Called by the reader on every read that
    /// got some.
    pub fn heard(&self) {
        if !self.sock.heard.load(Ordering::Relaxed) {
            self.sock.heard.store(true, Ordering::Relaxed);
        }
    }

    /// The peer has closed its end (or the connection failed), whether or not this side has
    /// read that yet: a coordinator that ended has let go of an agent at once, not only when
    /// the agent's reader gets round to the end of the stream (a second run started right after
    /// the first was refused as "in use" by the first). False once the connection is dropped.
    pub fn peer_closed(&self) -> bool {
        let Some(fd) = *lock(&self.sock.fd) else { return false };
        let mut p = libc::pollfd { fd, events: libc::POLLRDHUP, revents: 0 };
        // SAFETY: `fd` is the connection's open socket (the lock keeps it from being closed
        // meanwhile); a poll with timeout 0 only reads its state.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        n == 1 && p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
    }

    /// The door cut this connection: every further read or write should fail.
    pub fn is_cut(&self) -> bool {
        self.sock.cut.load(Ordering::SeqCst)
    }

    /// Wakes `waker` when the door cuts the connection (an async reader or writer that is about
    /// to wait calls this); true when it is cut already. An authenticated connection is never
    /// cut, and registers nothing.
    pub fn watch(&self, waker: &Waker) -> bool {
        if self.is_authenticated() {
            return false;
        }
        {
            let mut w = lock(&self.sock.waker);
            if !w.as_ref().is_some_and(|w| w.will_wake(waker)) {
                *w = Some(waker.clone());
            }
        }
        // Cut between the caller's check and the registration: the waker was taken already.
        self.is_cut()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut st = self.door.state();
        // A stranger still, or authenticated: its place is given back now. Cut: it was given
        // back when it was cut.
        if st.strangers.remove(&self.seq).is_some() || !self.sock.cut.load(Ordering::SeqCst) {
            st.total -= 1;
        }
    }
}

/// An admitted connection: the socket and its ticket. The door can cut it as long as it is
/// held; dropping it forgets the descriptor before the socket closes.
pub struct Held<S: AsRawFd> {
    io: S,
    ticket: Arc<Ticket>,
}

impl<S: AsRawFd> Held<S> {
    pub fn io(&self) -> &S {
        &self.io
    }

    pub fn io_mut(&mut self) -> &mut S {
        &mut self.io
    }

    pub fn ticket(&self) -> &Arc<Ticket> {
        &self.ticket
    }
}

impl<S: AsRawFd> Drop for Held<S> {
    fn drop(&mut self) {
        // Runs before `io` is dropped (and its descriptor closed).
        *lock(&self.ticket.sock.fd) = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};

    const L: Limits = Limits {
        connections: 6,
        unauthenticated: 5,
        per_network: 3,
        per_address: 2,
        silent: Duration::from_secs(3600),
        first_call: Duration::from_secs(3600),
    };

    /// A real connected pair on loopback: (the server's end, the client's end). The door is
    /// told another peer address: what it counts is what the test says.
    fn pair(l: &TcpListener) -> (TcpStream, TcpStream) {
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        (s, c)
    }

    fn at(s: &str) -> SocketAddr {
        SocketAddr::new(s.parse().unwrap(), 1000)
    }

    /// Whether the client's end learns that the server's end was cut: a reset (or an end),
    /// within 10 s.
    fn was_cut(c: &mut TcpStream) -> bool {
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        match c.read(&mut [0u8; 1]) {
            Ok(0) => true,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
            Ok(_) => false,
        }
    }

    fn still_open(c: &TcpStream) -> bool {
        c.set_nonblocking(true).unwrap();
        let open = matches!(c.peek(&mut [0u8; 1]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
        c.set_nonblocking(false).unwrap();
        open
    }

    /// A peer that closed its end is seen at once, before anything read the end of the stream;
    /// unread bytes before the close do not hide it.
    #[test]
    fn a_closed_peer_is_seen_before_the_reader_gets_there() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let door = Door::new("test", L);
        let (s, mut c) = pair(&l);
        let held = door.admit(s, at("10.0.0.1")).unwrap();
        let ticket = held.ticket().clone();
        assert!(!ticket.peer_closed());
        std::io::Write::write_all(&mut c, b"goodbye").unwrap();
        assert!(!ticket.peer_closed(), "bytes to read are not a close");
        drop(c);
        let t0 = Instant::now();
        while !ticket.peer_closed() {
            assert!(t0.elapsed() < Duration::from_secs(30), "the close was never seen");
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(held);
        assert!(!ticket.peer_closed(), "a dropped connection has no socket to ask");
    }

    /// Issue 35, finding 2: a full cap refused the newcomer, so idle connections from one
    /// address held its places for good. Now the newcomer evicts the oldest of its address,
    /// and the eviction really closes that connection.
    #[test]
    fn regression_a_full_address_evicts_its_oldest_stranger() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let door = Door::new("test", L);
        let (s1, mut c1) = pair(&l);
        let (s2, c2) = pair(&l);
        let (s3, c3) = pair(&l);
        let a1 = door.admit(s1, at("10.0.0.1")).unwrap();
        let t1 = a1.ticket().clone();
        // The server reads the oldest connection, as the agent and the metrics endpoint do,
        // and drops it when the read ends.
        let reader = std::thread::spawn(move || {
            let mut a1 = a1;
            // Bounded: without the cut it fails instead of hanging.
            a1.io().set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            a1.io_mut().read(&mut [0u8; 1]).map_err(|e| e.kind())
        });
        let a2 = door.admit(s2, at("10.0.0.1")).unwrap();
        let a3 = door.admit(s3, at("10.0.0.1")).expect("the newcomer is let in");
        assert!(t1.is_cut() && !a2.ticket().is_cut() && !a3.ticket().is_cut());
        assert_eq!(door.counts(), (2, 2, 1), "the evicted one's place was given back at once");
        assert!(matches!(reader.join().unwrap(), Ok(0)), "the reader of the evicted connection woke");
        assert!(was_cut(&mut c1), "the evicted connection is closed, for its client too");
        assert!(still_open(&c2) && still_open(&c3));
        drop((t1, a2, a3, c2, c3));
        assert_eq!(door.counts(), (0, 0, 0), "every place given back");
    }

    /// Issue 35, finding 2: the cap per network (/24, /64 for IPv6): a newcomer evicts the
    /// oldest stranger of its network, never one of another network.
    #[test]
    fn regression_a_full_network_evicts_its_own_oldest_ipv4_24_and_ipv6_64() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        for (net, other, outside) in [
            (["10.0.0.1", "10.0.0.2", "10.0.0.3"], "10.0.0.200", "10.0.1.1"),
            (["2001:db8::1", "2001:db8::2", "2001:db8::ffff:3"], "2001:db8::ffff:ffff:9", "2001:db8:0:1::1"),
        ] {
            let door = Door::new("test", L);
            let elsewhere = door.admit(pair(&l).0, at(outside)).unwrap();
            let held: Vec<_> = net.iter().map(|a| door.admit(pair(&l).0, at(a)).unwrap()).collect();
            let newcomer = door.admit(pair(&l).0, at(other)).unwrap();
            assert!(held[0].ticket().is_cut(), "{net:?}: the network's oldest is evicted");
            assert!(!held[1].ticket().is_cut() && !held[2].ticket().is_cut() && !newcomer.ticket().is_cut());
            assert!(!elsewhere.ticket().is_cut(), "{net:?}: another network is left alone");
        }
        assert_eq!(network("10.1.2.3".parse().unwrap()), network("10.1.2.250".parse().unwrap()));
        assert_ne!(network("10.1.2.3".parse().unwrap()), network("10.1.3.3".parse().unwrap()));
        assert_eq!(network("2001:db8::1".parse().unwrap()), network("2001:db8::ffff:1".parse().unwrap()));
        assert_ne!(network("2001:db8::1".parse().unwrap()), network("2001:db8:0:1::1".parse().unwrap()));
        assert_eq!(
            network("::ffff:10.1.2.3".parse().unwrap()),
            network("10.1.2.9".parse().unwrap()),
            "v4 on a v6 socket"
        );
    }

    /// Issue 35, finding 2: when the process's strangers are all in, the newcomer evicts from
    /// the network holding the most of them — a flood from many addresses evicts itself, not
    /// a client alone in its network — and of those, one that has sent nothing first, then the
    /// oldest.
    #[test]
    fn regression_a_full_door_evicts_from_the_fullest_network_silent_and_oldest_first() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let door = Door::new("test", L);
        let client = door.admit(pair(&l).0, at("192.168.7.7")).unwrap();
        let f1 = door.admit(pair(&l).0, at("10.0.0.1")).unwrap();
        let f2 = door.admit(pair(&l).0, at("10.0.0.2")).unwrap();
        let f3 = door.admit(pair(&l).0, at("10.0.0.3")).unwrap();
        let g1 = door.admit(pair(&l).0, at("10.0.9.1")).unwrap();
        // f1 spoke, so the silent f2 goes first, then f3, then the speaking f1.
        f1.ticket().heard();
        let n1 = door.admit(pair(&l).0, at("172.16.0.1")).unwrap();
        assert!(f2.ticket().is_cut() && !f1.ticket().is_cut() && !f3.ticket().is_cut());
        let n2 = door.admit(pair(&l).0, at("172.16.1.1")).unwrap();
        assert!(f3.ticket().is_cut() && !f1.ticket().is_cut());
        // Now 10.0.0/24, 10.0.9/24, 172.16.0/24, 172.16.1/24 and the client hold one each: the
        // oldest silent one among them goes — not the client, which spoke.
        client.ticket().heard();
        let n3 = door.admit(pair(&l).0, at("172.16.2.1")).unwrap();
        assert!(g1.ticket().is_cut(), "the oldest silent one");
        assert!(!client.ticket().is_cut() && !f1.ticket().is_cut() && !n1.ticket().is_cut() && !n2.ticket().is_cut());
        assert!(!n3.ticket().is_cut());
        assert_eq!(door.counts().1, 5);
    }

    /// Issue 35, finding 2: authentication gives a stranger's place back (and a cut one stays
    /// cut); the cap on all connections refuses only when authenticated clients hold every
    /// place; every place is given back when the connections end.
    #[test]
    fn regression_places_are_given_back_on_authentication_and_on_close() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let door = Door::new("test", L);
        let mut members = Vec::new();
        for i in 0..6 {
            let h = door.admit(pair(&l).0, at(&format!("10.{i}.0.1"))).unwrap();
            h.ticket().authenticated();
            h.ticket().authenticated();
            members.push(h);
        }
        assert_eq!(door.counts(), (6, 0, 0));
        let (s, mut c) = pair(&l);
        assert!(door.admit(s, at("10.9.0.1")).is_none(), "every place held by authenticated clients");
        assert!(was_cut(&mut c), "a refused connection is closed");
        members.pop();
        let stranger = door.admit(pair(&l).0, at("10.9.0.1")).unwrap();
        assert_eq!(door.counts(), (6, 1, 1));
        // The cap on all: the stranger is evicted for the newcomer.
        let newcomer = door.admit(pair(&l).0, at("10.9.0.2")).unwrap();
        assert!(stranger.ticket().is_cut());
        stranger.ticket().authenticated();
        assert!(stranger.ticket().is_cut(), "cut stays cut");
        drop(stranger);
        assert_eq!(door.counts(), (6, 1, 1));
        drop((members, newcomer));
        assert_eq!(door.counts(), (0, 0, 0), "every place given back");
    }

    /// Issue 35, finding 2: a stranger that sends nothing within `silent` is cut, one that
    /// spoke but is not authenticated within `first_call` too; the cut wakes a thread blocked
    /// reading the connection.
    #[test]
    fn regression_silent_and_slow_strangers_are_cut_and_their_readers_woken() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let door = Door::new(
            "test",
            Limits { silent: Duration::from_millis(100), first_call: Duration::from_millis(600), ..L },
        );
        let (s, mut silent_client) = pair(&l);
        let silent = door.admit(s, at("10.0.0.1")).unwrap();
        let (s, _speaking_client) = pair(&l);
        let speaking = door.admit(s, at("10.0.0.2")).unwrap();
        speaking.ticket().heard();
        let member = door.admit(pair(&l).0, at("10.0.0.3")).unwrap();
        member.ticket().authenticated();
        // A server thread blocked reading the silent connection.
        let reader = std::thread::spawn(move || {
            let mut silent = silent;
            silent.io().set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let got = silent.io_mut().read(&mut [0u8; 1]).map_err(|e| e.kind());
            (got, silent.ticket().is_cut())
        });
        std::thread::sleep(Duration::from_millis(300));
        door.sweep();
        let (got, cut) = reader.join().unwrap();
        assert!(cut && matches!(got, Ok(0)), "the blocked reader woke with the end: {got:?}");
        assert!(was_cut(&mut silent_client));
        assert!(!speaking.ticket().is_cut(), "it spoke");
        std::thread::sleep(Duration::from_millis(500));
        door.sweep();
        assert!(speaking.ticket().is_cut(), "not authenticated in time");
        assert!(!member.ticket().is_cut(), "authenticated: no deadline");
        assert_eq!(door.counts(), (1, 0, 0));
    }
}
