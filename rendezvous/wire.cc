#include "rendezvous/wire.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cstdlib>

namespace etrun::rendezvous {
namespace {

void AppendInt32LittleEndian(std::string* out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

int32_t ReadInt32LittleEndian(std::string_view bytes) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= uint32_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
  return static_cast<int32_t>(value);
}

}  // namespace

std::string HmacSha256(std::string_view key, std::string_view data) {
  static const unsigned char kEmpty = 0;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_length = 0;
  // OpenSSL wants non-null pointers even for empty inputs.
  const void* key_bytes = key.empty() ? static_cast<const void*>(&kEmpty) : key.data();
  const auto* data_bytes =
      data.empty() ? &kEmpty : reinterpret_cast<const unsigned char*>(data.data());
  if (HMAC(EVP_sha256(), key_bytes, static_cast<int>(key.size()), data_bytes, data.size(), mac,
           &mac_length) == nullptr ||
      mac_length != kWireMacBytes) {
    std::abort();  // can't happen: SHA-256 is always available
  }
  return std::string(reinterpret_cast<const char*>(mac), mac_length);
}

std::string EncodeFrame(std::string_view key, std::string_view body) {
  std::string frame = HmacSha256(key, body);
  frame.reserve(kWireHeaderBytes + body.size());
  AppendInt32LittleEndian(&frame, static_cast<uint32_t>(body.size()));
  frame.append(body);
  return frame;
}

std::string EncodePingRequestFrame(std::string_view key) {
  return EncodeFrame(key, EncodePingRequest());
}

std::string EncodeHostsUpdatedFrame(std::string_view key, int64_t timestamp, HostUpdateResult res) {
  return EncodeFrame(key, EncodeHostsUpdatedRequest(timestamp, res));
}

FrameDecoder::FrameDecoder(std::string_view key, size_t max_body_bytes)
    : key_(key), max_body_(max_body_bytes) {}

FrameStatus FrameDecoder::Feed(std::string_view data, size_t* consumed, std::string* err) {
  *consumed = 0;
  if (status_ == FrameStatus::kError) *err = error_;
  if (status_ != FrameStatus::kNeedMore) return status_;
  if (header_.size() < kWireHeaderBytes) {
    size_t take = std::min(data.size(), kWireHeaderBytes - header_.size());
    header_.append(data.substr(0, take));
    data.remove_prefix(take);
    *consumed += take;
    if (header_.size() < kWireHeaderBytes) return status_;
    int32_t length = ReadInt32LittleEndian(std::string_view(header_).substr(kWireMacBytes));
    if (length < 0) {
      error_ = "wire: negative frame length " + std::to_string(length);
    } else if (static_cast<size_t>(length) > max_body_) {
      error_ = "wire: frame length " + std::to_string(length) + " exceeds the limit of " +
               std::to_string(max_body_) + " bytes";
    } else {
      body_length_ = static_cast<size_t>(length);
      body_.reserve(body_length_);
    }
    if (!error_.empty()) {
      status_ = FrameStatus::kError;
      *err = error_;
      return status_;
    }
  }
  size_t take = std::min(data.size(), body_length_ - body_.size());
  body_.append(data.substr(0, take));
  *consumed += take;
  if (body_.size() < body_length_) return status_;
  std::string mac = HmacSha256(key_, body_);
  if (CRYPTO_memcmp(mac.data(), header_.data(), kWireMacBytes) != 0) {
    error_ = "wire: frame MAC does not match (wrong key or corrupted frame)";
    status_ = FrameStatus::kError;
    *err = error_;
    return status_;
  }
  status_ = FrameStatus::kComplete;
  return status_;
}

size_t FrameDecoder::bytes_wanted() const {
  if (status_ != FrameStatus::kNeedMore) return 0;
  if (header_.size() < kWireHeaderBytes) return kWireHeaderBytes - header_.size();
  return body_length_ - body_.size();
}

bool DecodeFrame(std::string_view key, std::string_view frame, std::string* body, std::string* err,
                 size_t max_body_bytes) {
  FrameDecoder decoder(key, max_body_bytes);
  size_t consumed = 0;
  FrameStatus status = decoder.Feed(frame, &consumed, err);
  if (status == FrameStatus::kError) return false;
  if (status == FrameStatus::kNeedMore) {
    *err = "wire: truncated frame (" + std::to_string(frame.size()) + " bytes, " +
           std::to_string(decoder.bytes_wanted()) + " more needed)";
    return false;
  }
  if (consumed != frame.size()) {
    *err = "wire: " + std::to_string(frame.size() - consumed) + " bytes after the frame";
    return false;
  }
  *body = decoder.body();
  return true;
}

}  // namespace etrun::rendezvous
