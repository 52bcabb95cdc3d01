// prfaas-bench serve: the load generator's HTTP side. The workload, SSE parsing and
// statistics are plain classes in loadgen/; this file owns the threads and sockets.
//
// Open loop (poisson, bursty, mmpp): one dispatcher thread releases each request at its
// arrival time to a pool of --max-in-flight workers, each with its own keep-alive
// connection. A slow server never delays an arrival: a request that finds every
// worker busy is recorded as client-saturated and not sent. Closed loop: --concurrency
// workers, each sending its next request when the previous one ends.

#include "serve_bench.hpp"

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <deque>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>

#include <CLI/CLI.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "loadgen/results.hpp"
#include "loadgen/trace.hpp"
#include "loadgen/workload.hpp"
#include "stats.hpp"

namespace prfaas::bench {

namespace {

using json = nlohmann::json;
namespace lg = prfaas::loadgen;

/// Set by SIGINT: stop issuing, cut in-flight streams, report what finished.
std::atomic<bool> interrupted{false};

extern "C" void on_sigint(int) {
  interrupted = true;
  std::signal(SIGINT, SIG_DFL); // a second ^C ends the process
}

double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// One keep-alive connection to the server with the run's timeouts.
std::unique_ptr<httplib::Client> make_client(const serve_options& o) {
  auto cli = std::make_unique<httplib::Client>(o.url);
  auto timeout = std::chrono::duration<double>(o.timeout_s);
  cli->set_connection_timeout(std::min(timeout, std::chrono::duration<double>(10.0)));
  cli->set_read_timeout(timeout);
  cli->set_write_timeout(timeout);
  cli->set_keep_alive(true);
  cli->set_tcp_nodelay(true); // the request must leave at once, not after a delayed ACK
  return cli;
}

/// The id of the first model of GET /v1/models, or an explanation in `why`.
std::optional<std::string> first_model(const serve_options& o, std::string& why) {
  auto cli = make_client(o);
  auto res = cli->Get("/v1/models");
  if (!res) {
    why = "GET " + o.url + "/v1/models: " + httplib::to_string(res.error());
    return std::nullopt;
  }
  if (res->status != 200) {
    why = "GET " + o.url + "/v1/models: HTTP " + std::to_string(res->status);
    return std::nullopt;
  }
  auto j = json::parse(res->body, nullptr, false);
  if (j.is_object() && j.contains("data") && j["data"].is_array() && !j["data"].empty() &&
      j["data"][0].is_object() && j["data"][0].contains("id") && j["data"][0]["id"].is_string())
    return j["data"][0]["id"].get<std::string>();
  why = "GET " + o.url + "/v1/models: no model listed; give --model";
  return std::nullopt;
}

/// What every request of the run shares.
struct run_context {
  const serve_options& o;
  lg::api_kind api;
  std::string model;
  clock_type::time_point t0;
};

/// What the request body of `spec` asks for.
lg::body_options body_of(const lg::request_spec& spec, const run_context& ctx) {
  const auto& o = ctx.o;
  lg::body_options b;
  b.model = ctx.model;
  b.max_tokens = spec.output_tokens;
  b.temperature = o.temperature;
  b.seed = o.seed + spec.index;
  if (!o.stop.empty())
    b.stop = o.stop;
  b.stream = o.stream;
  b.token_ids = o.record_tokens;
  return b;
}

/// Sends `spec` and reads the whole response; never throws.
/// What one exchange received, filled in by the request's handlers as bytes arrive.
struct received {
  lg::response_reader reader;
  int status = 0;
  std::string retry_after;
  std::string whole; ///< a non-streamed or error body (at most body_cap bytes)
  bool timed_out = false, cancelled = false;
  static constexpr size_t body_cap = 64 << 20;
};

/// The request for `spec` (recorded in `r` when --record-tokens asks for it).
httplib::Request build_request(const lg::request_spec& spec, const run_context& ctx,
                               lg::request_result& r) {
  const auto b = body_of(spec, ctx);
  httplib::Request req;
  req.method = "POST";
  req.path = lg::api_path(ctx.api);
  auto prompt = lg::prompt_text(spec);
  req.body = lg::request_body(ctx.api, prompt, b).dump();
  if (ctx.o.record_tokens)
    r.record = lg::request_result::recorded{
        .prompt = std::move(prompt), .temperature = b.temperature, .seed = *b.seed};
  req.headers = {{"Content-Type", "application/json"},
                 {"Accept", ctx.o.stream ? "text/event-stream" : "application/json"}};
  return req;
}

/// The handlers that take the response into `in`: the stream is parsed as it arrives
/// (first-token timing), anything else kept whole; a timeout or an interrupt stops it.
void receive_into(httplib::Request& req, received& in, clock_type::time_point sent,
                  const serve_options& o) {
  req.response_handler = [&in](const httplib::Response& res) {
    in.status = res.status;
    in.retry_after = res.get_header_value("Retry-After");
    return true;
  };
  req.content_receiver = [&in, sent, &o](const char* data, size_t n, uint64_t, uint64_t) {
    double t = since(sent);
    if (interrupted) {
      in.cancelled = true;
      return false;
    }
    if (t > o.timeout_s) {
      in.timed_out = true;
      return false;
    }
    if (in.status == 200 && o.stream)
      in.reader.on_stream_bytes({data, n}, t);
    else if (in.whole.size() < received::body_cap)
      in.whole.append(data, std::min(n, received::body_cap - in.whole.size()));
    return true;
  };
}

/// No complete response: it timed out, was interrupted, or the connection failed.
void transport_failure(lg::request_result& r, const received& in, httplib::Error err,
                       double timeout_s) {
  if (in.timed_out || r.e2e_s >= timeout_s) {
    r.status = lg::outcome::timeout;
    r.error = "no complete response within --timeout " + std::to_string(timeout_s) + " s";
  } else if (in.cancelled || interrupted) {
    r.status = lg::outcome::cancelled;
    r.error = "interrupted";
  } else {
    r.status = lg::outcome::connection_error;
    r.error = httplib::to_string(err);
    if (in.status)
      r.error += " after HTTP " + std::to_string(in.status) + " and " +
                 std::to_string(in.reader.text_chunks()) + " text chunks";
  }
}

/// An HTTP error status: the server's error body and Retry-After in the error.
void http_failure(lg::request_result& r, const received& in) {
  r.status = lg::outcome::http_error;
  auto e = lg::parse_error_body(in.whole);
  r.error = "HTTP " + std::to_string(in.status);
  if (e)
    r.error += ": " + (e->type.empty() ? "" : e->type + ": ") + e->message;
  if (!in.retry_after.empty())
    r.error += " (Retry-After: " + in.retry_after + ")";
}

/// A 200: the answer's tokens and timing, or what was wrong with it.
void read_answer(lg::request_result& r, received& in, bool stream) {
  auto& reader = in.reader;
  if (stream)
    reader.on_end(r.e2e_s);
  else
    reader.on_body(in.whole, r.e2e_s);
  r.output_tokens = reader.output_tokens();
  r.prfaas = reader.prfaas();
  r.ttft_s = reader.first_token_s();
  if (r.record)
    r.record->token_ids = reader.token_ids();
  if (auto& e = reader.error()) {
    r.status = reader.error_kind() == "stream_error" ? lg::outcome::stream_error
                                                     : lg::outcome::bad_response;
    r.error = (e->type.empty() ? "" : e->type + ": ") + e->message;
  } else if (stream && !r.ttft_s) {
    r.status = lg::outcome::bad_response;
    r.error = "the stream carried no text";
  }
}

lg::request_result send_one(httplib::Client& cli, const lg::request_spec& spec,
                            const run_context& ctx) {
  lg::request_result r;
  r.index = spec.index;
  r.input_tokens = spec.input_tokens;
  r.requested_output_tokens = spec.output_tokens;
  r.scheduled_s = spec.arrival_s;
  auto req = build_request(spec, ctx, r);
  received in{.reader = lg::response_reader{ctx.api, ctx.o.stream}};
  auto sent = clock_type::now();
  r.sent_s = std::chrono::duration<double>(sent - ctx.t0).count();
  receive_into(req, in, sent, ctx.o);
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  bool sent_ok = cli.send(req, res, err);
  r.e2e_s = since(sent);
  r.http_status = in.status;
  r.output_tokens = in.reader.output_tokens();
  r.prfaas = in.reader.prfaas();
  if (!sent_ok)
    transport_failure(r, in, err, ctx.o.timeout_s);
  else if (in.status != 200)
    http_failure(r, in);
  else
    read_answer(r, in, ctx.o.stream);
  return r;
}

/// The worker pool and the dispatcher; one per run.
class runner {
public:
  runner(const run_context& ctx, lg::request_source& source, bool closed)
      : ctx_(ctx), source_(source), closed_(closed),
        capacity_(closed ? ctx.o.concurrency : ctx.o.max_in_flight) {}

  /// Runs the whole workload; the results in completion order.
  std::vector<lg::request_result> run() {
    std::vector<std::thread> workers;
    for (size_t i = 0; i < capacity_; ++i)
      workers.emplace_back([this] { work(); });
    std::thread progress;
    if (ctx_.o.progress || ::isatty(STDERR_FILENO))
      progress = std::thread([this] { show_progress(); });
    dispatch();
    {
      std::lock_guard lock{mu_};
      closing_ = true;
    }
    work_cv_.notify_all();
    for (auto& w : workers)
      w.join();
    finished_ = true;
    if (progress.joinable())
      progress.join();
    std::lock_guard lock{mu_};
    return std::move(results_);
  }

private:
  void dispatch() {
    while (!interrupted) {
      auto spec = source_.next();
      if (!spec)
        return;
      if (closed_) {
        if (started_ < capacity_ && ctx_.o.ramp_up_s > 0) { // stream `started_` starts later
          const auto at =
              ctx_.t0 + std::chrono::duration_cast<clock_type::duration>(
                            std::chrono::duration<double>(ctx_.o.ramp_up_s * started_ / capacity_));
          while (!interrupted && clock_type::now() < at)
            std::this_thread::sleep_until(
                std::min(at, clock_type::now() + std::chrono::milliseconds(100)));
        }
        ++started_;
        std::unique_lock lock{mu_};
        // Bounded waits so ^C and --duration are noticed while every stream is busy.
        while (busy_ >= capacity_ && !interrupted)
          slot_cv_.wait_for(lock, std::chrono::milliseconds(100));
        if (interrupted || (ctx_.o.duration_s > 0 && since(ctx_.t0) >= ctx_.o.duration_s))
          return;
        ++busy_;
        queue_.push_back(std::move(*spec));
        work_cv_.notify_one();
        continue;
      }
      auto at = ctx_.t0 + std::chrono::duration_cast<clock_type::duration>(
                              std::chrono::duration<double>(spec->arrival_s));
      while (!interrupted && clock_type::now() < at)
        std::this_thread::sleep_until(
            std::min(at, clock_type::now() + std::chrono::milliseconds(100)));
      if (interrupted)
        return;
      std::unique_lock lock{mu_};
      if (busy_ >= capacity_) {
        lg::request_result r;
        r.index = spec->index;
        r.input_tokens = spec->input_tokens;
        r.requested_output_tokens = spec->output_tokens;
        r.scheduled_s = spec->arrival_s;
        r.sent_s = since(ctx_.t0);
        r.status = lg::outcome::client_saturated;
        r.error = "all " + std::to_string(capacity_) + " --max-in-flight slots busy";
        results_.push_back(std::move(r));
        ++done_;
        ++errors_;
        continue;
      }
      ++busy_;
      queue_.push_back(std::move(*spec));
      work_cv_.notify_one();
    }
  }

  void work() {
    auto cli = make_client(ctx_.o);
    for (;;) {
      lg::request_spec spec;
      {
        std::unique_lock lock{mu_};
        work_cv_.wait(lock, [&] { return !queue_.empty() || closing_; });
        if (queue_.empty())
          return;
        spec = std::move(queue_.front());
        queue_.pop_front();
      }
      auto r = send_one(*cli, spec, ctx_);
      bool ok = r.ok();
      {
        std::lock_guard lock{mu_};
        results_.push_back(std::move(r));
        --busy_;
      }
      ++done_;
      if (!ok)
        ++errors_;
      slot_cv_.notify_one();
    }
  }

  /// A '\r'-updated line on stderr: done/total, in flight, errors, recent rate.
  void show_progress() {
    auto total = source_.size();
    std::deque<std::pair<double, size_t>> window; // (time, done) over the last ~5 s
    auto line = [&] {
      double now = since(ctx_.t0);
      size_t done = done_;
      window.emplace_back(now, done);
      while (window.size() > 1 && now - window.front().first > 5)
        window.pop_front();
      double span = now - window.front().first;
      double rate = span > 0 ? (done - window.front().second) / span : 0;
      size_t in_flight;
      {
        std::lock_guard lock{mu_};
        in_flight = busy_;
      }
      std::fprintf(stderr, "\r  %zu/%s done  %zu in flight  %zu errors  %.2f req/s  %.0f s   ",
                   done, total ? std::to_string(*total).c_str() : "?", in_flight,
                   static_cast<size_t>(errors_), rate, now);
      std::fflush(stderr);
    };
    while (!finished_) {
      line();
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    line();
    std::fputc('\n', stderr);
  }

  const run_context& ctx_;
  lg::request_source& source_;
  bool closed_;
  size_t capacity_;
  size_t started_ = 0; ///< closed: requests handed to streams so far (dispatcher only)
  std::mutex mu_;
  std::condition_variable work_cv_, slot_cv_;
  std::deque<lg::request_spec> queue_;      ///< guarded by mu_
  size_t busy_ = 0;                         ///< slots taken (queued or sending); by mu_
  bool closing_ = false;                    ///< by mu_
  std::vector<lg::request_result> results_; ///< by mu_
  std::atomic<size_t> done_{0}, errors_{0};
  std::atomic<bool> finished_{false};
};

/// The workload the options describe; throws std::invalid_argument or trace_error.
std::unique_ptr<lg::request_source> make_source(const serve_options& o) {
  lg::stop_config stop{o.requests, o.duration_s};
  if (o.workload == "trace") {
    if (o.trace.empty())
      throw std::invalid_argument("--workload trace needs --trace FILE");
    lg::trace_options t;
    t.time_scale = o.time_scale;
    t.input_scale = o.input_scale;
    t.max_input = o.max_input;
    t.max_output = o.max_output;
    t.output_len = o.output_len_given ? o.output_len : 0;
    return std::make_unique<lg::trace_workload>(lg::load_trace(o.trace), t, stop);
  }
  lg::synthetic_config c;
  if (o.workload == "fixed")
    c.input = {lg::length_dist::fixed, o.input_len, {}};
  else
    c.input = {
        lg::length_dist::lognormal, 0, {o.input_mu, o.input_sigma, o.input_min, o.input_max}};
  if (o.output_dist == "lognormal")
    c.output = {
        lg::length_dist::lognormal, 0, {o.output_mu, o.output_sigma, o.output_min, o.output_max}};
  else
    c.output = {lg::length_dist::fixed, o.output_len, {}};
  c.arrivals.kind = lg::parse_arrival_kind(o.arrival);
  c.arrivals.rate = o.rate;
  c.arrivals.burst_on_s = o.burst_on_s;
  c.arrivals.burst_off_s = o.burst_off_s;
  for (int i = 0; i < 2; ++i) {
    c.arrivals.mmpp_rate[i] = o.mmpp_rates.at(i);
    c.arrivals.mmpp_dwell_s[i] = o.mmpp_dwell_s.at(i);
  }
  c.arrivals.concurrency = o.concurrency;
  c.stop = stop;
  if (!c.stop.max_requests && !(c.stop.duration_s > 0))
    c.stop.max_requests = 100;
  std::mt19937_64 rng{o.seed};
  return std::make_unique<lg::synthetic_workload>(c, rng);
}

} // namespace

void add_serve_options(CLI::App& s, serve_options& o) {
  s.add_option("--url", o.url, "server base URL")->capture_default_str();
  s.add_option("--endpoint", o.endpoint, "API: completions or chat")
      ->check(CLI::IsMember({"completions", "chat"}))
      ->capture_default_str();
  s.add_option("--model", o.model, "model name (default: the first of GET /v1/models)");
  s.add_flag("!--no-stream", o.stream, "ask for whole responses instead of SSE streams");
  s.add_option("--temperature", o.temperature, "sampling temperature")->capture_default_str();
  s.add_option("--stop", o.stop, "a stop string to send (none by default)");

  s.add_option("--workload", o.workload, "lognormal (the paper's), fixed, or trace")
      ->check(CLI::IsMember({"lognormal", "fixed", "trace"}))
      ->capture_default_str();
  s.add_option("--trace", o.trace, "Mooncake trace (JSONL) for --workload trace");
  s.add_option("--input-len", o.input_len, "input tokens for --workload fixed")
      ->capture_default_str();
  s.add_option("--input-mu", o.input_mu, "log-normal mu of input lengths")->capture_default_str();
  s.add_option("--input-sigma", o.input_sigma, "log-normal sigma")->capture_default_str();
  s.add_option("--input-min", o.input_min, "shortest input")->capture_default_str();
  s.add_option("--input-max", o.input_max, "longest input")->capture_default_str();
  s.add_option("--output-dist", o.output_dist, "fixed or lognormal output lengths")
      ->check(CLI::IsMember({"fixed", "lognormal"}))
      ->capture_default_str();
  s.add_option_function<uint32_t>(
       "--output-len",
       [&o](const uint32_t& v) {
         o.output_len = v;
         o.output_len_given = true;
       },
       "output tokens (default 1024; with a trace, replaces its lengths)")
      ->check(CLI::PositiveNumber);
  s.add_option("--output-mu", o.output_mu, "--output-dist lognormal: mu")->capture_default_str();
  s.add_option("--output-sigma", o.output_sigma, "--output-dist lognormal: sigma")
      ->capture_default_str();
  s.add_option("--output-min", o.output_min, "--output-dist lognormal: shortest")
      ->capture_default_str();
  s.add_option("--output-max", o.output_max, "--output-dist lognormal: longest")
      ->capture_default_str();
  s.add_option("--arrival", o.arrival, "poisson, bursty (on/off), mmpp (2-state), closed")
      ->check(CLI::IsMember({"poisson", "bursty", "mmpp", "closed"}))
      ->capture_default_str();
  s.add_option("--rate", o.rate, "req/s (bursty: the rate during a burst)")->capture_default_str();
  s.add_option("--burst-on", o.burst_on_s, "bursty: seconds of each burst")->capture_default_str();
  s.add_option("--burst-off", o.burst_off_s, "bursty: idle seconds between bursts")
      ->capture_default_str();
  s.add_option("--mmpp-rates", o.mmpp_rates, "mmpp: R0,R1 req/s in each state")
      ->expected(2)
      ->delimiter(',');
  s.add_option("--mmpp-dwell", o.mmpp_dwell_s, "mmpp: S0,S1 mean seconds in each state")
      ->expected(2)
      ->delimiter(',');
  s.add_option("--concurrency", o.concurrency, "closed: number of streams")->capture_default_str();
  s.add_option("--ramp-up", o.ramp_up_s,
               "closed: seconds over which the streams start, evenly spaced (0 = all at once)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  s.add_option("--requests,--limit", o.requests,
               "number of requests (default: 100 synthetic, the whole trace)");
  s.add_option("--duration", o.duration_s, "stop issuing after this many seconds");
  s.add_option("--seed", o.seed, "seed of the whole workload")->capture_default_str();
  s.add_option("--time-scale", o.time_scale, "trace: arrival times multiplied by this")
      ->capture_default_str();
  s.add_option("--input-scale", o.input_scale, "trace: input lengths (and blocks) times this")
      ->capture_default_str();
  s.add_option("--max-input", o.max_input, "trace: cap on input tokens (0 = none)");
  s.add_option("--max-output", o.max_output, "trace: cap on output tokens (0 = none)");

  s.add_option("--max-in-flight", o.max_in_flight, "open loop: concurrent requests at most")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  s.add_option("--timeout", o.timeout_s, "seconds for one whole request")->capture_default_str();
  s.add_option("--slo-ttft", o.slo_ttft_ms, "goodput: TTFT bound in ms (0 = none)");
  s.add_option("--slo-tpot", o.slo_tpot_ms, "goodput: TPOT bound in ms")->capture_default_str();
  s.add_option("--json", o.json, "write results as JSON to FILE, or - for stdout");
  s.add_flag("--per-request", o.per_request, "include every request in the JSON");
  s.add_flag("--record-tokens", o.record_tokens,
             "with --per-request: each request's prompt, sampling and output token ids");
  s.add_flag("--progress", o.progress, "progress line on stderr even when it is not a TTY");
}

int run_serve_bench(const serve_options& o) {
  // With --json -, stdout carries only the JSON; the table goes to stderr.
  std::FILE* human = o.json == "-" ? stderr : stdout;
  std::unique_ptr<lg::request_source> source;
  lg::api_kind api;
  try {
    api = lg::parse_api_kind(o.endpoint);
    if (o.mmpp_rates.size() != 2 || o.mmpp_dwell_s.size() != 2)
      throw std::invalid_argument("--mmpp-rates and --mmpp-dwell take two values each");
    if (!(o.timeout_s > 0))
      throw std::invalid_argument("--timeout must be > 0");
    if (o.arrival == "closed" && o.concurrency == 0)
      throw std::invalid_argument("--concurrency must be >= 1");
    if (o.ramp_up_s > 0 && o.arrival != "closed")
      throw std::invalid_argument("--ramp-up applies to --arrival closed only");
    source = make_source(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prfaas-bench serve: %s\n", e.what());
    return 1;
  }
  std::string model = o.model;
  if (model.empty()) {
    std::string why;
    auto m = first_model(o, why);
    if (!m) {
      std::fprintf(stderr, "prfaas-bench serve: %s\n", why.c_str());
      return 1;
    }
    model = *m;
  }

  std::fprintf(human, "prfaas-bench serve: %s %s model=%s workload=%s arrival=%s seed=%llu\n",
               o.url.c_str(), lg::api_path(api).c_str(), model.c_str(), o.workload.c_str(),
               o.arrival.c_str(), static_cast<unsigned long long>(o.seed));
  std::fflush(human);

  interrupted = false;
  auto previous = std::signal(SIGINT, on_sigint);
  run_context ctx{o, api, model, clock_type::now()};
  runner r{ctx, *source, o.arrival == "closed"};
  auto results = r.run();
  double duration = since(ctx.t0);
  std::signal(SIGINT, previous);

  std::sort(results.begin(), results.end(), [](auto& a, auto& b) { return a.index < b.index; });
  lg::slo_config slo;
  if (o.slo_ttft_ms > 0)
    slo.ttft_ms = o.slo_ttft_ms;
  slo.tpot_ms = o.slo_tpot_ms;
  auto summary = lg::summarize_run(results, slo, duration);
  std::fputs(lg::format_report(summary).c_str(), human);
  if (interrupted)
    std::fputs("interrupted: requests not yet sent were dropped\n", human);

  if (!o.json.empty()) {
    json j = lg::to_json(summary);
    j["config"] = serve_config_json(o, model);
    j["interrupted"] = interrupted.load();
    if (o.per_request) {
      j["per_request"] = json::array();
      for (auto& x : results)
        j["per_request"].push_back(lg::to_json(x));
    }
    auto text = j.dump(2) + "\n";
    if (o.json == "-") {
      std::fputs(text.c_str(), stdout);
    } else {
      std::ofstream out{o.json};
      out << text;
      if (!out) {
        std::fprintf(stderr, "prfaas-bench serve: cannot write %s\n", o.json.c_str());
        return 1;
      }
    }
  }
  return 0;
}

} // namespace prfaas::bench
