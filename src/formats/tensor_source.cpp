// open_tensor_source: a safetensors directory (sharded or not) or a single .gguf /
// .safetensors file behind one interface, plus the TensorInfo -> WeightMatrix views.
#include "formats/tensor_source.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"
#include "formats/config_checks.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"

namespace ds4 {

namespace fs = std::filesystem;

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

static std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "{";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "}";
}

const TensorInfo* TensorSource::find(std::string_view name) const {
  for (const TensorInfo& t : tensors())
    if (t.name == name) return &t;
  return nullptr;
}

const TensorInfo& TensorSource::get(std::string_view name) const {
  const TensorInfo* t = find(name);
  if (!t) throw InputError(path() + ": tensor '" + std::string(name) + "' not found");
  return *t;
}

const TensorInfo& TensorSource::get(std::string_view name, const std::vector<int64_t>& expected_shape) const {
  const TensorInfo& t = get(name);
  if (t.shape != expected_shape)
    throw InputError(t.file + ": tensor '" + t.name + "': shape " + shape_str(t.shape) + ", expected " +
                     shape_str(expected_shape));
  return t;
}

const nlohmann::json& text_config(const nlohmann::json& config) {
  auto it = config.find("text_config");
  if (it != config.end() && it->is_object()) return *it;
  return config;
}

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": invalid JSON: " + e.what());
  }
}

namespace {

class SafetensorsSource : public TensorSource {
 public:
  // `files`: the shard files to open; `dir`: where config.json lives ("" for none).
  SafetensorsSource(std::string path, const std::vector<std::string>& files, const std::string& config_path)
      : path_(std::move(path)) {
    std::map<std::string, std::string> where;
    for (const std::string& f : files) {
      SafetensorsFile st = read_safetensors(MappedFile::open(f));
      for (TensorInfo& t : st.tensors) {
        auto [it, fresh] = where.emplace(t.name, f);
        if (!fresh) throw InputError(f + ": tensor '" + t.name + "': duplicate tensor name (also in " + it->second + ")");
        tensors_.push_back(std::move(t));
      }
      files_.push_back(st.file);
    }
    config_ = config_path.empty() || !fs::exists(config_path) ? nlohmann::json::object() : read_json_file(config_path);
    check_config_values(config_, config_path);
    metadata_ = nlohmann::json::object();
  }
  const std::vector<TensorInfo>& tensors() const override { return tensors_; }
  const nlohmann::json& config() const override { return config_; }
  const nlohmann::json& metadata() const override { return metadata_; }
  const std::string& path() const override { return path_; }
  std::string format() const override { return "safetensors"; }

 private:
  std::string path_;
  std::vector<std::shared_ptr<const MappedFile>> files_;  // keep the mappings alive
  std::vector<TensorInfo> tensors_;
  nlohmann::json config_, metadata_;
};

class GgufSource : public TensorSource {
 public:
  explicit GgufSource(const std::string& path) : path_(path), g_(read_gguf(path)) {
    metadata_ = nlohmann::json::object();
    for (const GgufKV& kv : g_.kvs) metadata_[kv.key] = kv.value.to_json();
    for (const GgufTensor& gt : g_.tensors) {
      TensorInfo t;
      t.name = gt.name;
      t.type = gt.type;
      t.shape = gt.shape;
      t.data = g_.tensor_data(gt);
      t.bytes = gt.bytes;
      t.file = path;
      tensors_.push_back(std::move(t));
    }
    config_ = build_config();
    check_config_values(config_, path_ + " (config)");
  }
  const std::vector<TensorInfo>& tensors() const override { return tensors_; }
  const nlohmann::json& config() const override { return config_; }
  const nlohmann::json& metadata() const override { return metadata_; }
  const std::string& path() const override { return path_; }
  std::string format() const override { return "gguf"; }

 private:
  // ds4-convert stores the HF config.json text verbatim; other GGUFs get the
  // architecture's keys with the "<arch>." prefix removed.
  nlohmann::json build_config() const {
    if (const GgufValue* v = g_.find("ds4.config_json")) {
      if (v->type != GgufType::STRING) throw InputError(path_ + ": ds4.config_json: not a string");
      try {
        return nlohmann::json::parse(v->value.get<std::string>());
      } catch (const nlohmann::json::exception& e) {
        throw InputError(path_ + ": ds4.config_json: invalid JSON: " + e.what());
      }
    }
    nlohmann::json c = nlohmann::json::object();
    const GgufValue* arch = g_.find("general.architecture");
    if (!arch || arch->type != GgufType::STRING) return c;
    std::string prefix = arch->value.get<std::string>() + ".";
    c["architecture"] = arch->value;
    for (const GgufKV& kv : g_.kvs)
      if (kv.key.compare(0, prefix.size(), prefix) == 0) c[kv.key.substr(prefix.size())] = kv.value.to_json();
    return c;
  }
  std::string path_;
  GgufFile g_;
  std::vector<TensorInfo> tensors_;
  nlohmann::json config_, metadata_;
};

std::unique_ptr<TensorSource> open_dir(const std::string& dir) {
  std::string index = (fs::path(dir) / "model.safetensors.index.json").string();
  std::vector<std::string> files;
  if (fs::exists(index)) {
    nlohmann::json j = read_json_file(index);
    auto wm = j.find("weight_map");
    if (wm == j.end() || !wm->is_object()) throw InputError(index + ": weight_map: missing or not an object");
    std::set<std::string> shards;
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it->is_string()) throw InputError(index + ": weight_map['" + it.key() + "']: not a string");
      std::string s = it->get<std::string>();
      if (s.find('/') != std::string::npos || s == ".." ) throw InputError(index + ": weight_map['" + it.key() + "']: bad file name '" + s + "'");
      shards.insert(s);
    }
    for (const std::string& s : shards) files.push_back((fs::path(dir) / s).string());
  } else {
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".safetensors") files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
  }
  bool has_gguf = false;
  if (files.empty()) {
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".gguf") has_gguf = true;
    throw InputError(dir + ": no *.safetensors files" + std::string(has_gguf ? " (pass the .gguf file itself)" : ""));
  }
  return std::make_unique<SafetensorsSource>(dir, files, (fs::path(dir) / "config.json").string());
}

}  // namespace

std::unique_ptr<TensorSource> open_tensor_source(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return open_dir(path);
  if (!fs::exists(path, ec)) throw InputError(path + ": no such file or directory");
  // Sniff the magic rather than trusting the extension.
  char magic[4] = {0, 0, 0, 0};
  std::ifstream(path, std::ios::binary).read(magic, 4);
  if (std::string(magic, 4) == "GGUF") return std::make_unique<GgufSource>(path);
  if (fs::path(path).extension() == ".safetensors") {
    std::string cfg = (fs::path(path).parent_path() / "config.json").string();
    return std::make_unique<SafetensorsSource>(path, std::vector<std::string>{path}, cfg);
  }
  throw InputError(path + ": not a GGUF file (bad magic) nor a .safetensors file or directory");
}

}  // namespace ds4
