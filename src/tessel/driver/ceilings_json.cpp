#include "tessel/driver/ceilings_json.h"

#include "tessel/support/error.h"

namespace tessel {

namespace {

// j[key] as T, or a tessel::Error saying which field is wrong.
template <class T>
T field(const Json& j, const char* key) {
  TS_CHECK(j.is_object() && j.contains(key), "ceilings: no field '", key, "'");
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    fail("ceilings: field '", key, "' has the wrong type");
  }
}

double positive(const Json& j, const char* key) {
  const double v = field<double>(j, key);
  TS_CHECK(v > 0, "ceilings: field '", key, "' must be positive, got ", v);
  return v;
}

CeilingSet set_from_json(const Json& j) {
  CeilingSet s;
  s.threads = field<int>(j, "threads");
  TS_CHECK(s.threads >= 1, "ceilings: threads must be at least 1, got ", s.threads);
  s.fma_flops_per_s = positive(j, "fma_flops_per_s");
  s.launch_s = field<double>(j, "launch_s");
  TS_CHECK(s.launch_s >= 0, "ceilings: launch_s must be >= 0");
  const Json levels = field<Json>(j, "levels");
  TS_CHECK(levels.is_array() && !levels.empty(), "ceilings: 'levels' must be a non-empty array");
  for (const Json& l : levels) {
    MemoryLevel lv{field<std::string>(l, "name"), field<int64_t>(l, "capacity"), positive(l, "read_bytes_per_s")};
    TS_CHECK(!lv.name.empty() && lv.capacity >= 0, "ceilings: a level needs a name and a capacity >= 0");
    s.levels.push_back(lv);
  }
  TS_CHECK(s.levels.back().capacity == 0, "ceilings: the last level (DRAM) must be unbounded (capacity 0)");
  return s;
}

}  // namespace

Json ceiling_set_to_json(const CeilingSet& s) {
  Json j = Json::object();
  j["threads"] = s.threads;
  j["fma_flops_per_s"] = s.fma_flops_per_s;
  Json levels = Json::array();
  for (const MemoryLevel& lv : s.levels) {
    Json l = Json::object();
    l["name"] = lv.name;
    l["capacity"] = lv.capacity;
    l["read_bytes_per_s"] = lv.read_bytes_per_s;
    levels.push_back(l);
  }
  j["levels"] = levels;
  j["launch_s"] = s.launch_s;
  return j;
}

Json ceilings_to_json(const CpuCeilings& c) {
  Json j = Json::object();
  j["format"] = kCeilingsFormat;
  j["fingerprint"] = c.fingerprint;
  j["measured_at"] = c.measured_at;
  j["load_average"] = c.load_average;
  j["disturbed_samples"] = c.disturbed_samples;
  j["isa"] = c.isa;
  j["lanes"] = c.lanes;
  Json sets = Json::array();
  for (const CeilingSet& s : c.sets) sets.push_back(ceiling_set_to_json(s));
  j["sets"] = sets;
  return j;
}

CpuCeilings ceilings_from_json(const Json& j) {
  TS_CHECK(j.is_object(), "ceilings: not a JSON object");
  const int format = field<int>(j, "format");
  TS_CHECK(format == kCeilingsFormat, "ceilings: format ", format, " (this tessel reads ", kCeilingsFormat, ")");
  CpuCeilings c;
  c.fingerprint = field<std::string>(j, "fingerprint");
  c.measured_at = field<std::string>(j, "measured_at");
  c.load_average = field<double>(j, "load_average");
  c.disturbed_samples = field<int>(j, "disturbed_samples");
  c.isa = field<std::string>(j, "isa");
  c.lanes = field<int>(j, "lanes");
  const Json sets = field<Json>(j, "sets");
  TS_CHECK(sets.is_array() && !sets.empty(), "ceilings: 'sets' must be a non-empty array");
  for (const Json& s : sets) c.sets.push_back(set_from_json(s));
  return c;
}

}  // namespace tessel
