//! `moat-search-eval`: recall@1, recall@5 and MRR of the lexical, semantic and hybrid
//! rankings (and of each improvement switched on and off) over an evaluation set, the
//! token cost of search mode against the full catalog, and search latency.
//!
//! ```text
//! cargo run -p moat-search --release --bin moat-search-eval -- \
//!     [--json] [--catalog FILE] [--tasks FILE] [--model DIR | --no-model] [--cache DIR]
//!     [--misses] [--quick] [--large N] [--rounds N] [--split index|tool] [--explain QUERY]
//! ```
//!
//! Every ranking is also scored on two halves of the tasks (A and B), so that a change can
//! be kept only when it helps on both, not on a lucky part of the set: by default even and
//! odd task positions, with `--split tool` by a hash of the wanted tool's name (no tool in
//! both halves, a harder test of generalisation).

use moat_search::eval::{self, Catalog, Latency, Metrics, Task};
use moat_search::fusion::Fusion;
use moat_search::{Embedder, Index, Options, Ranking};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

struct Args {
    json: bool,
    catalog: PathBuf,
    tasks: PathBuf,
    model: Option<PathBuf>,
    no_model: bool,
    cache: PathBuf,
    misses: bool,
    quick: bool,
    large: usize,
    rounds: usize,
    split_by_tool: bool,
    explain: Vec<String>,
    only: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        json: false,
        catalog: eval::default_catalog(),
        tasks: eval::default_tasks(),
        model: None,
        no_model: false,
        cache: std::env::temp_dir().join("moat-search-eval-cache"),
        misses: false,
        quick: false,
        large: 1000,
        rounds: 3,
        split_by_tool: false,
        explain: Vec::new(),
        only: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--json" => a.json = true,
            "--misses" => a.misses = true,
            "--quick" => a.quick = true,
            "--no-model" => a.no_model = true,
            "--catalog" => a.catalog = value("--catalog")?.into(),
            "--tasks" => a.tasks = value("--tasks")?.into(),
            "--model" => a.model = Some(value("--model")?.into()),
            "--cache" => a.cache = value("--cache")?.into(),
            "--explain" => a.explain.push(value("--explain")?),
            "--only" => a.only = Some(value("--only")?),
            "--split" => {
                a.split_by_tool = match value("--split")?.as_str() {
                    "index" => false,
                    "tool" => true,
                    other => return Err(format!("--split: index or tool, not {other:?}")),
                }
            }
            "--large" => {
                a.large = value("--large")?
                    .parse()
                    .map_err(|e| format!("--large: {e}"))?
            }
            "--rounds" => {
                a.rounds = value("--rounds")?
                    .parse()
                    .map_err(|e| format!("--rounds: {e}"))?
            }
            "-h" | "--help" => {
                return Err("usage: moat-search-eval [--json] [--catalog FILE] [--tasks FILE] [--model DIR | --no-model] \
                            [--cache DIR] [--misses] [--quick: default rankings only] [--large N (0: skip)] [--rounds N] \
                            [--split index|tool] [--explain QUERY (repeatable; rankings of that query only)] \
                            [--only TEXT: rankings whose name contains TEXT]"
                    .into());
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    Ok(a)
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), moat_search::SearchError> {
    let catalog = Catalog::load(&args.catalog)?;
    let tasks = eval::load_tasks(&args.tasks)?;
    let model_dir = if args.no_model {
        None
    } else if let Some(m) = &args.model {
        Some(m.clone())
    } else {
        eval::test_model_dir()?
    };
    let started = Instant::now();
    let embedder = match &model_dir {
        Some(d) => Some(Arc::new(Embedder::load(d)?)),
        None => {
            eprintln!(
                "no model found (run scripts/fetch-model.sh or pass --model DIR): lexical rankings only"
            );
            None
        }
    };
    let load_ms = ms(started);

    // Cold build: a fresh cache directory, so every tool is embedded.
    let cold_dir =
        std::env::temp_dir().join(format!("moat-search-eval-cold-{}", std::process::id()));
    let started = Instant::now();
    let rich = Index::build_with(
        catalog.docs(),
        embedder.clone(),
        Some(&cold_dir),
        Options::default(),
    )?;
    let cold_ms = ms(started);
    let started = Instant::now();
    let rich = {
        drop(rich);
        Index::build_with(
            catalog.docs(),
            embedder.clone(),
            Some(&cold_dir),
            Options::default(),
        )?
    };
    let warm_ms = ms(started);
    let _ = std::fs::remove_dir_all(&cold_dir);
    let short = Index::build_with(
        catalog.docs(),
        embedder.clone(),
        Some(&args.cache),
        Options {
            short_view: true,
            ..Options::default()
        },
    )?;
    let plain = Index::build_with(
        catalog.docs(),
        embedder.clone(),
        Some(&args.cache),
        Options::plain(),
    )?;

    // The rankings below embed the same requests many times over; latency is measured
    // on `rich` without the memo.
    let memo_rich = Index::build_with(
        catalog.docs(),
        embedder.clone(),
        Some(&args.cache),
        Options::default(),
    )?
    .memoize_queries();
    let (short, plain) = (short.memoize_queries(), plain.memoize_queries());
    let d = Options::default();
    let p = Options::plain();
    let rows: Vec<(&str, &Index, Options)> = vec![
        (
            "lexical, plain",
            &plain,
            Options {
                ranking: Ranking::Lexical,
                ..p.clone()
            },
        ),
        (
            "semantic, plain",
            &plain,
            Options {
                ranking: Ranking::Semantic,
                ..p.clone()
            },
        ),
        ("hybrid, plain RRF", &plain, p.clone()),
        ("hybrid + rich index text", &memo_rich, p.clone()),
        (
            "hybrid + query clean-up",
            &plain,
            Options {
                clean_query: true,
                ..p.clone()
            },
        ),
        (
            "hybrid + aliases (lexical)",
            &plain,
            Options {
                expand_aliases: true,
                ..p.clone()
            },
        ),
        (
            "hybrid + aliases (lexical+semantic)",
            &plain,
            Options {
                expand_aliases: true,
                expand_semantic: true,
                ..p.clone()
            },
        ),
        (
            "lexical, all improvements",
            &memo_rich,
            Options {
                ranking: Ranking::Lexical,
                ..d.clone()
            },
        ),
        (
            "semantic, all improvements",
            &memo_rich,
            Options {
                ranking: Ranking::Semantic,
                ..d.clone()
            },
        ),
        ("hybrid, all (default)", &memo_rich, d.clone()),
        ("hybrid, all + short view", &short, d.clone()),
        ("hybrid, all but rich text", &plain, d.clone()),
        (
            "hybrid, all but typo correction",
            &memo_rich,
            Options {
                correct_typos: false,
                ..d.clone()
            },
        ),
        (
            "hybrid, all, semantic weight 1",
            &memo_rich,
            Options {
                semantic_weight: 1.0,
                ..d.clone()
            },
        ),
        (
            "hybrid, all but clean-up",
            &memo_rich,
            Options {
                clean_query: false,
                ..d.clone()
            },
        ),
        (
            "hybrid, all but aliases",
            &memo_rich,
            Options {
                expand_aliases: false,
                expand_semantic: false,
                ..d.clone()
            },
        ),
        (
            "hybrid, all but semantic aliases",
            &memo_rich,
            Options {
                expand_semantic: false,
                ..d.clone()
            },
        ),
        (
            "hybrid, all, semantic weight 0.5",
            &memo_rich,
            Options {
                semantic_weight: 0.5,
                ..d.clone()
            },
        ),
        (
            "hybrid, all, semantic weight 0.75",
            &memo_rich,
            Options {
                semantic_weight: 0.75,
                ..d.clone()
            },
        ),
        (
            "hybrid, all, semantic weight 1.5",
            &memo_rich,
            Options {
                semantic_weight: 1.5,
                ..d.clone()
            },
        ),
        (
            "hybrid, all, semantic weight 2",
            &memo_rich,
            Options {
                semantic_weight: 2.0,
                ..d.clone()
            },
        ),
        (
            "hybrid, all, expansion weight 0.25",
            &memo_rich,
            Options {
                expansion_weight: 0.25,
                ..d.clone()
            },
        ),
        (
            "hybrid, all, expansion weight 1",
            &memo_rich,
            Options {
                expansion_weight: 1.0,
                ..d.clone()
            },
        ),
        (
            "hybrid, all, semantic weight 4",
            &memo_rich,
            Options {
                semantic_weight: 4.0,
                ..d.clone()
            },
        ),
        (
            "hybrid, all, RRF k 20 (semantic weight 1)",
            &memo_rich,
            Options {
                fusion: Fusion::Rrf,
                semantic_weight: 1.0,
                ..d.clone()
            },
        ),
        (
            "hybrid, all, RRF k 60 (semantic weight 1)",
            &memo_rich,
            Options {
                fusion: Fusion::Rrf,
                semantic_weight: 1.0,
                rrf_k: 60.0,
                ..d.clone()
            },
        ),
        (
            "hybrid, all, standard-score fusion",
            &memo_rich,
            Options {
                fusion: Fusion::ZScore,
                ..d.clone()
            },
        ),
        (
            "hybrid, all, standard-score fusion, no server prior",
            &memo_rich,
            Options {
                fusion: Fusion::ZScore,
                server_prior: 0.0,
                ..d.clone()
            },
        ),
        (
            "hybrid, all but server prior",
            &memo_rich,
            Options {
                server_prior: 0.0,
                ..d.clone()
            },
        ),
        (
            "hybrid, all, raw query embedded too",
            &memo_rich,
            Options {
                raw_query: true,
                ..d.clone()
            },
        ),
        (
            "hybrid, all but question prior",
            &memo_rich,
            Options {
                question_prior: 0.0,
                ..d.clone()
            },
        ),
        (
            "hybrid, all, question prior 3",
            &memo_rich,
            Options {
                question_prior: 3.0,
                ..d.clone()
            },
        ),
        (
            "hybrid, all, question prior 1",
            &memo_rich,
            Options {
                question_prior: 1.0,
                ..d.clone()
            },
        ),
    ];
    let has_model = embedder.is_some();
    if !args.explain.is_empty() {
        explain(&rich, &args.explain, &d);
        return Ok(());
    }
    let (half_a, half_b) = halves(&tasks, args.split_by_tool);
    let results: Vec<(&str, [Metrics; 3])> = rows
        .iter()
        .filter(|(name, _, o)| {
            has_model || (o.ranking == Ranking::Lexical && !name.contains("weight"))
        })
        .filter(|(name, _, _)| {
            !args.quick || name.contains("all improvements") || name.contains("(default)")
        })
        .filter(|(name, _, _)| {
            name.contains("(default)")
                || args.only.as_ref().is_none_or(|o| name.contains(o.as_str()))
        })
        .map(|(name, idx, o)| {
            (
                *name,
                [
                    eval::evaluate(idx, &tasks, o),
                    eval::evaluate(idx, &half_a, o),
                    eval::evaluate(idx, &half_b, o),
                ],
            )
        })
        .collect();

    let tokens = eval::token_cost(&catalog, &rich, &tasks);

    let mut latencies: Vec<(&str, Latency)> = Vec::new();
    let lexical = Options {
        ranking: Ranking::Lexical,
        ..d.clone()
    };
    latencies.push((
        "catalog, lexical",
        eval::latency(&rich, &tasks, &lexical, args.rounds),
    ));
    if has_model {
        latencies.push((
            "catalog, hybrid (query embedded)",
            eval::latency(&rich, &tasks, &d, args.rounds),
        ));
    }
    let mut large_build_ms = None;
    if args.large > 0 {
        let big = catalog.replicate(args.large);
        let started = Instant::now();
        let big = Index::build_with(
            big.docs(),
            embedder.clone(),
            Some(&args.cache),
            Options::default(),
        )?;
        large_build_ms = Some(ms(started));
        latencies.push((
            "large, lexical",
            eval::latency(&big, &tasks, &lexical, args.rounds),
        ));
        if has_model {
            latencies.push((
                "large, hybrid (query embedded)",
                eval::latency(&big, &tasks, &d, args.rounds),
            ));
        }
    }

    if args.json {
        let out = json!({
            "tasks": tasks.len(),
            "tools": rich.len(),
            "model": model_dir.as_ref().map(|d| d.display().to_string()),
            "rankings": results.iter().map(|(n, m)| json!({"name": n, "metrics": m[0], "half_a": m[1], "half_b": m[2]})).collect::<Vec<_>>(),
            "tokens": tokens,
            "latency": latencies.iter().map(|(n, l)| json!({"name": n, "latency": l})).collect::<Vec<_>>(),
            "build_ms": {"model_load": load_ms, "cold": cold_ms, "from_cache": warm_ms, "large_cached_or_cold": large_build_ms},
        });
        println!("{out:#}");
    } else {
        print_table(
            args,
            &catalog,
            &tasks,
            model_dir.as_ref(),
            &results,
            &tokens,
            &latencies,
        );
        println!(
            "\nbuild: model load {load_ms:.0} ms; index of {} tools {cold_ms:.0} ms cold, {warm_ms:.0} ms from the cache{}",
            rich.len(),
            large_build_ms
                .map(|m| format!(
                    "; {} tools {m:.0} ms (cache {})",
                    args.large,
                    args.cache.display()
                ))
                .unwrap_or_default()
        );
    }
    if args.misses {
        eprintln!("\nmisses at rank 5 (hybrid, default options):");
        for (t, hits) in eval::misses(&memo_rich, &tasks, &d) {
            eprintln!("  {:?} → want {}, got {}", t.query, t.tool, hits.join(", "));
        }
    }
    Ok(())
}

fn print_table(
    args: &Args,
    catalog: &Catalog,
    tasks: &[Task],
    model: Option<&PathBuf>,
    results: &[(&str, [Metrics; 3])],
    tokens: &eval::TokenCost,
    latencies: &[(&str, Latency)],
) {
    println!(
        "moat-search evaluation: {} tasks ({}), {} tools on {} servers ({}), model: {}\n",
        tasks.len(),
        args.tasks.display(),
        catalog.docs().len(),
        catalog.servers.len(),
        args.catalog.display(),
        model.map_or("none".to_owned(), |d| d.display().to_string())
    );
    println!(
        "| ranking | recall@1 | recall@5 | MRR | recall@5 A ({}) | recall@5 B ({}) | MRR A | MRR B |",
        results.first().map_or(0, |r| r.1[1].tasks),
        results.first().map_or(0, |r| r.1[2].tasks)
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (name, [m, a, b]) in results {
        println!(
            "| {name} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
            m.recall_at_1, m.recall_at_5, m.mrr, a.recall_at_5, b.recall_at_5, a.mrr, b.mrr
        );
    }
    println!("\n| context cost (o200k_base tokens) | tokens |");
    println!("|---|---:|");
    println!(
        "| full catalog ({} tools) | {} |",
        tokens.tools, tokens.full_catalog
    );
    println!(
        "| search mode: the three meta-tools | {} |",
        tokens.search_mode
    );
    println!(
        "| one search_tools answer (5 hits), mean | {} |",
        tokens.mean_search_result
    );
    println!(
        "| one describe_tool answer, mean | {} |",
        tokens.mean_describe_result
    );
    println!("\n| search latency (top 5) | tools | median ms | p99 ms |");
    println!("|---|---:|---:|---:|");
    for (name, l) in latencies {
        println!(
            "| {name} | {} | {:.3} | {:.3} |",
            l.tools, l.median_ms, l.p99_ms
        );
    }
}

/// The two halves of the tasks: by even and odd position, or by a hash of the wanted
/// tool's name (FNV-1a, stable across runs and platforms).
fn halves(tasks: &[Task], by_tool: bool) -> (Vec<Task>, Vec<Task>) {
    let fnv = |s: &str| {
        s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    let in_a = |i: usize, t: &Task| {
        if by_tool {
            fnv(&t.tool) % 2 == 0
        } else {
            i.is_multiple_of(2)
        }
    };
    let mut halves = (Vec::new(), Vec::new());
    for (i, t) in tasks.iter().enumerate() {
        if in_a(i, t) {
            halves.0.push(t.clone());
        } else {
            halves.1.push(t.clone());
        }
    }
    halves
}

/// Prints the lexical, semantic and hybrid top ten of each query, with scores.
fn explain(index: &Index, queries: &[String], opts: &Options) {
    for q in queries {
        println!("query {q:?}");
        for ranking in [Ranking::Lexical, Ranking::Semantic, Ranking::Hybrid] {
            let o = Options {
                ranking,
                ..opts.clone()
            };
            let hits = index.search_with(q, 10, &|_| true, &o);
            println!("  {ranking:?}:");
            for h in hits {
                println!("    {:8.4}  {}", h.score, h.name);
            }
        }
    }
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}
