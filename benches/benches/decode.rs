//! Decoding what arrives on the wire: a small `tools/call` request (envelope, params, the
//! tool's typed arguments) and a 50-tool `tools/list` result, through moat, through rmcp's
//! message types, and into a plain `serde_json::Value` as a reference.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use moat_bench::{decode, fixtures};

fn bench(c: &mut Criterion) {
    let call = fixtures::call_tool_request();
    let mut g = c.benchmark_group("decode/tools_call");
    g.throughput(Throughput::Bytes(call.len() as u64));
    g.bench_function("moat", |b| b.iter(|| decode::moat_call(black_box(&call))));
    g.bench_function("rmcp", |b| b.iter(|| decode::rmcp_call(black_box(&call))));
    g.bench_function("serde_json_value", |b| {
        b.iter(|| decode::value(black_box(&call)))
    });
    g.finish();

    let list = fixtures::list_tools_response(50);
    let mut g = c.benchmark_group("decode/tools_list_50");
    g.throughput(Throughput::Bytes(list.len() as u64));
    g.bench_function("moat", |b| b.iter(|| decode::moat_list(black_box(&list))));
    g.bench_function("rmcp", |b| b.iter(|| decode::rmcp_list(black_box(&list))));
    g.bench_function("serde_json_value", |b| {
        b.iter(|| decode::value(black_box(&list)))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50);
    targets = bench
}
criterion_main!(benches);
