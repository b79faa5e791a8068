//! Generates the gRPC code from proto/agent.proto with protox (no protoc binary needed).

fn main() {
    println!("cargo:rerun-if-changed=proto/agent.proto");
    let fds = protox::compile(["proto/agent.proto"], ["proto"]).expect("proto/agent.proto compiles");
    tonic_prost_build::configure().compile_fds(fds).expect("gRPC code generates");
}
