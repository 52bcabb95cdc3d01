// prfaas-bench: benchmarks and load generation.
//   prfaas-bench transport [--round-trips N] [--pipelined N] [--bulk N] [--repeat R] [--json]
//   prfaas-bench transfer [--bytes N] [--chunk N] [--connections N] [--link-rate R] [--json]
//   prfaas-bench serve [--url URL] [--workload lognormal|fixed|trace] [--rate R] ... [--json FILE]
//   prfaas-bench directory [--trace FILE] [--workers N] [--duplicate D] ... [--json]

#include <CLI/CLI.hpp>

#include "directory_bench.hpp"
#include "serve_bench.hpp"
#include "transfer_bench.hpp"
#include "transport_bench.hpp"

int main(int argc, char** argv) {
  CLI::App app{"prfaas-bench: benchmarks for prfaas"};
  app.require_subcommand(1);
  prfaas::bench::transport_options t;
  auto* transport = app.add_subcommand(
      "transport", "control-plane transport between two processes vs raw ZeroMQ");
  transport->add_option("--round-trips", t.round_trips, "sequential request/response pairs");
  transport->add_option("--pipelined", t.pipelined, "one-way messages in the pipelined run");
  transport->add_option("--bulk", t.bulk_messages, "1 MiB messages in the bulk run");
  transport->add_option("--payload", t.payload_bytes, "bytes per small message");
  transport->add_option("--repeat", t.repeat, "runs per measurement (best is reported)");
  transport->add_flag("--json", t.json, "also print one JSON line");
  transport->add_flag("!--no-inline", t.inline_delivery,
                      "transport.inline_delivery: false (every delivery wakes a CAF worker)");
  prfaas::bench::serve_options serve_opts;
  auto* serve = app.add_subcommand(
      "serve", "load generator for the OpenAI-compatible API: latency, throughput, goodput");
  prfaas::bench::add_serve_options(*serve, serve_opts);
  prfaas::bench::transfer_options transfer_opts;
  prfaas::bench::add_transfer_options(app, transfer_opts);
  prfaas::bench::directory_options directory_opts;
  prfaas::bench::add_directory_options(app, directory_opts);
  CLI11_PARSE(app, argc, argv);
  if (*transport)
    return prfaas::bench::run_transport_bench(t);
  if (*serve)
    return prfaas::bench::run_serve_bench(serve_opts);
  if (*app.get_subcommand("transfer"))
    return prfaas::bench::run_transfer_bench(transfer_opts);
  if (*app.get_subcommand("directory"))
    return prfaas::bench::run_directory_bench(directory_opts);
  return 0;
}
