// The decoders of rendezvous/pickle.h: run the pickle machine, then walk its result along the
// one shape each message has.
#include <unordered_map>

#include "rendezvous/pickle.h"
#include "rendezvous/pickle_machine.h"

namespace etrun::rendezvous {
namespace {

using pickle_vm::Global;
using pickle_vm::Kind;
using pickle_vm::Machine;
using pickle_vm::Printable;
using pickle_vm::Value;

std::string Describe(const Machine& m, uint32_t index) {
  const Value& v = m.at(index);
  if (v.kind == Kind::kObject) {
    return std::string(pickle_vm::GlobalName(static_cast<Global>(v.number))) + " instance";
  }
  return std::string("a ") + pickle_vm::KindName(v.kind);
}

// Runs the machine; on success the root must be an instance of `cls` whose attributes are exactly
// `names` (the last assignment of each wins); *fields gets their values in that order.
bool LoadInstance(std::string_view bytes, Machine* m, Global cls,
                  std::initializer_list<std::string_view> names, std::vector<uint32_t>* fields,
                  std::string* err) {
  std::string_view class_name = pickle_vm::GlobalName(cls);
  uint32_t root = 0;
  if (!m->Run(bytes, &root, err)) return false;
  const Value& object = m->at(root);
  if (object.kind != Kind::kObject || object.number != static_cast<int64_t>(cls)) {
    *err = "expected a " + std::string(class_name) + ", got " + Describe(*m, root);
    return false;
  }
  fields->assign(names.size(), UINT32_MAX);
  for (size_t i = 0; i + 1 < object.items.size(); i += 2) {
    const std::string& key = m->at(object.items[i]).text;
    size_t k = 0;
    for (std::string_view expected : names) {
      if (key == expected) break;
      ++k;
    }
    if (k == names.size()) {
      *err = std::string(class_name) + " has an unexpected attribute " + Printable(key);
      return false;
    }
    (*fields)[k] = object.items[i + 1];
  }
  for (size_t k = 0; k < names.size(); ++k) {
    if ((*fields)[k] == UINT32_MAX) {
      *err = std::string(class_name) + " lacks the attribute " + std::string(names.begin()[k]);
      return false;
    }
  }
  return true;
}

}  // namespace

bool DecodePingRequest(std::string_view bytes, std::string* err) {
  Machine m;
  std::vector<uint32_t> fields;
  return LoadInstance(bytes, &m, Global::kPingRequest, {}, &fields, err);
}

bool DecodeAckResponse(std::string_view bytes, std::string* err) {
  Machine m;
  std::vector<uint32_t> fields;
  return LoadInstance(bytes, &m, Global::kAckResponse, {}, &fields, err);
}

bool DecodePingResponse(std::string_view bytes, std::string* service_name,
                        std::string* source_address, std::string* err) {
  Machine m;
  std::vector<uint32_t> fields;
  if (!LoadInstance(bytes, &m, Global::kPingResponse, {"service_name", "source_address"}, &fields,
                    err)) {
    return false;
  }
  for (uint32_t field : fields) {
    if (m.at(field).kind != Kind::kStr) {
      *err = "PingResponse field is " + Describe(m, field) + ", not a str";
      return false;
    }
  }
  *service_name = m.at(fields[0]).text;
  *source_address = m.at(fields[1]).text;
  return true;
}

bool DecodeHostsUpdatedRequest(std::string_view bytes, int64_t* timestamp, HostUpdateResult* res,
                               std::string* err) {
  Machine m;
  std::vector<uint32_t> fields;
  if (!LoadInstance(bytes, &m, Global::kHostsUpdatedRequest, {"timestamp", "res"}, &fields, err)) {
    return false;
  }
  const Value& time = m.at(fields[0]);
  const Value& flags = m.at(fields[1]);
  if (time.kind != Kind::kInt) {
    *err = "HostsUpdatedRequest.timestamp is " + Describe(m, fields[0]) + ", not an int";
    return false;
  }
  if ((flags.kind != Kind::kFlag && flags.kind != Kind::kInt) || flags.number < 0 ||
      flags.number > 3) {
    *err = "HostsUpdatedRequest.res is not a HostUpdateResult in 0..3";
    return false;
  }
  *timestamp = time.number;
  *res = static_cast<HostUpdateResult>(flags.number);
  return true;
}

bool DecodeWorkerAddresses(std::string_view bytes, WorkerAddresses* addresses, std::string* key,
                           std::string* err) {
  Machine m;
  uint32_t root = 0;
  if (!m.Run(bytes, &root, err)) return false;
  const Value& pair = m.at(root);
  if (pair.kind != Kind::kTuple || pair.items.size() != 2 ||
      m.at(pair.items[0]).kind != Kind::kDict || m.at(pair.items[1]).kind != Kind::kBytes) {
    *err = "worker addresses: expected a (dict, bytes) tuple, got " + Describe(m, root);
    return false;
  }
  if (m.at(pair.items[1]).text.size() != kWorkerKeyBytes) {
    *err = "worker addresses: the key has " + std::to_string(m.at(pair.items[1]).text.size()) +
           " bytes, not " + std::to_string(kWorkerKeyBytes);
    return false;
  }
  // A key's position by value index, then by text: a BINGET'd key costs no hashing of its text.
  WorkerAddresses result;
  std::unordered_map<uint32_t, size_t> position_by_value;
  std::unordered_map<std::string_view, size_t> position_by_name;
  size_t total = 0;
  const std::vector<uint32_t>& entries = m.at(pair.items[0]).items;
  for (size_t i = 0; i + 1 < entries.size(); i += 2) {
    const std::string& name = m.at(entries[i]).text;
    const Value& list = m.at(entries[i + 1]);
    if (list.kind != Kind::kList) {
      *err = "worker addresses: interface " + Printable(name) + " maps to " +
             Describe(m, entries[i + 1]) + ", not a list";
      return false;
    }
    std::vector<SocketAddress> parsed;
    for (uint32_t item : list.items) {
      const Value& tuple = m.at(item);
      if (++total > kMaxWorkerAddresses) {
        *err = "worker addresses: more than " + std::to_string(kMaxWorkerAddresses) + " addresses";
        return false;
      }
      if (tuple.kind != Kind::kTuple || tuple.items.size() != 2 ||
          m.at(tuple.items[0]).kind != Kind::kStr ||
          m.at(tuple.items[0]).text.size() > kMaxWorkerIpBytes ||
          m.at(tuple.items[1]).kind != Kind::kInt || m.at(tuple.items[1]).number < 1 ||
          m.at(tuple.items[1]).number > 65535) {
        *err = "worker addresses: interface " + Printable(name) +
               " has an entry that is not an (ip str, port 1..65535) tuple";
        return false;
      }
      parsed.push_back({m.at(tuple.items[0]).text, static_cast<int>(m.at(tuple.items[1]).number)});
    }
    auto by_value = position_by_value.find(entries[i]);
    if (by_value == position_by_value.end()) {
      auto by_name = position_by_name.emplace(name, result.size()).first;
      by_value = position_by_value.emplace(entries[i], by_name->second).first;
    }
    if (by_value->second == result.size()) {
      result.push_back({name, std::move(parsed)});
    } else {
      result[by_value->second].addresses = std::move(parsed);
    }
  }
  *addresses = std::move(result);
  *key = m.at(pair.items[1]).text;
  return true;
}

}  // namespace etrun::rendezvous
