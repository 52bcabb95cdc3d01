#include "loadgen/trace.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

namespace prfaas::loadgen {

namespace {

using json = nlohmann::json;

uint64_t unsigned_field(const json& j, const char* key, uint64_t max) {
  auto it = j.find(key);
  if (it == j.end())
    throw std::invalid_argument(std::string{"missing \""} + key + "\"");
  if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0))
    throw std::invalid_argument(std::string{"\""} + key + "\" must be a non-negative integer");
  auto v = it->get<uint64_t>();
  if (v > max)
    throw std::invalid_argument(std::string{"\""} + key + "\" is too large");
  return v;
}

trace_record parse_record(const std::string& line) {
  json j = json::parse(line); // throws json::parse_error
  if (!j.is_object())
    throw std::invalid_argument("not a JSON object");
  trace_record r;
  auto ts = j.find("timestamp");
  if (ts == j.end() || !ts->is_number() || !(ts->get<double>() >= 0))
    throw std::invalid_argument("\"timestamp\" must be a number >= 0 (milliseconds)");
  r.timestamp_ms = ts->get<double>();
  r.input_length = static_cast<uint32_t>(unsigned_field(j, "input_length", UINT32_MAX));
  if (r.input_length == 0)
    throw std::invalid_argument("\"input_length\" must be >= 1");
  r.output_length = static_cast<uint32_t>(unsigned_field(j, "output_length", UINT32_MAX));
  auto ids = j.find("hash_ids");
  if (ids == j.end() || !ids->is_array())
    throw std::invalid_argument("\"hash_ids\" must be an array");
  r.hash_ids.reserve(ids->size());
  for (auto& id : *ids) {
    if (!id.is_number_unsigned() && !(id.is_number_integer() && id.get<int64_t>() >= 0))
      throw std::invalid_argument("\"hash_ids\" must hold non-negative integers");
    r.hash_ids.push_back(id.get<uint64_t>());
  }
  return r;
}

} // namespace

std::vector<trace_record> parse_trace(std::istream& in, const std::string& name) {
  std::vector<trace_record> out;
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    try {
      out.push_back(parse_record(line));
    } catch (const json::exception& e) {
      throw trace_error(name, n, std::string{"not valid JSON ("} + e.what() + ")");
    } catch (const std::invalid_argument& e) {
      throw trace_error(name, n, e.what());
    }
  }
  return out;
}

std::vector<trace_record> load_trace(const std::string& path) {
  std::ifstream in{path};
  if (!in)
    throw trace_error(path, 0, "cannot open");
  return parse_trace(in, path);
}

void trace_options::validate() const {
  if (!(time_scale >= 0))
    throw std::invalid_argument("--time-scale must be >= 0");
  if (!(input_scale > 0))
    throw std::invalid_argument("--input-scale must be > 0");
}

trace_workload::trace_workload(std::vector<trace_record> records, trace_options o, stop_config stop)
    : records_(std::move(records)), o_(o), stop_(stop) {
  o_.validate();
  std::stable_sort(records_.begin(), records_.end(),
                   [](auto& a, auto& b) { return a.timestamp_ms < b.timestamp_ms; });
}

request_spec trace_workload::spec(size_t i) const {
  const auto& rec = records_.at(i);
  request_spec r;
  r.index = i;
  r.arrival_s = (rec.timestamp_ms - records_.front().timestamp_ms) / 1000.0 * o_.time_scale;
  r.block_tokens =
      std::max<size_t>(1, static_cast<size_t>(std::llround(trace_block_tokens * o_.input_scale)));
  double in = std::max(1.0, std::round(rec.input_length * o_.input_scale));
  if (o_.max_input)
    in = std::min<double>(in, o_.max_input);
  r.input_tokens = static_cast<uint32_t>(in);
  r.output_tokens = o_.output_len ? o_.output_len : rec.output_length;
  if (o_.max_output)
    r.output_tokens = std::min(r.output_tokens, o_.max_output);
  r.output_tokens = std::max<uint32_t>(r.output_tokens, 1);
  size_t blocks = (r.input_tokens + r.block_tokens - 1) / r.block_tokens;
  r.hash_ids.assign(rec.hash_ids.begin(),
                    rec.hash_ids.begin() + std::min(blocks, rec.hash_ids.size()));
  r.prompt_seed = i; // only for blocks the trace did not name
  return r;
}

std::optional<request_spec> trace_workload::next() {
  if (over_ || next_ >= records_.size() || (stop_.max_requests && next_ >= stop_.max_requests))
    return std::nullopt;
  auto r = spec(next_);
  if (stop_.duration_s > 0 && r.arrival_s > stop_.duration_s) {
    over_ = true;
    return std::nullopt;
  }
  ++next_;
  return r;
}

std::optional<size_t> trace_workload::size() const {
  if (stop_.duration_s > 0)
    return std::nullopt;
  return stop_.max_requests ? std::min(stop_.max_requests, records_.size()) : records_.size();
}

} // namespace prfaas::loadgen
