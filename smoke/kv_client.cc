#include "smoke/kv_client.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <thread>

namespace etrun::smoke {
namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// "30 s", "0.5 s".
std::string FormatSeconds(std::chrono::milliseconds ms) {
  std::string text = std::to_string(ms.count() / 1000);
  if (int rest = static_cast<int>(ms.count() % 1000); rest != 0) {
    std::string frac = std::to_string(1000 + rest).substr(1);
    while (frac.back() == '0') frac.pop_back();
    text += "." + frac;
  }
  return text + " s";
}

}  // namespace

ParseStatus ParseHttpResponse(std::string_view raw, bool at_eof, int* status, std::string* body,
                              std::string* err) {
  const size_t end_of_headers = raw.find("\r\n\r\n");
  if (end_of_headers == std::string_view::npos) {
    if (!at_eof) return ParseStatus::kIncomplete;
    *err = raw.empty() ? "no answer" : "answer ends inside its headers";
    return ParseStatus::kMalformed;
  }
  std::string_view headers = raw.substr(0, end_of_headers + 2);
  // Status line: "HTTP/1.1 404 Not Found".
  size_t line_end = headers.find("\r\n");
  std::string_view status_line = headers.substr(0, line_end);
  if (status_line.rfind("HTTP/1.", 0) != 0 || status_line.size() < 12 || status_line[8] != ' ') {
    *err = "not an HTTP answer: '" + std::string(status_line.substr(0, 40)) + "'";
    return ParseStatus::kMalformed;
  }
  std::string_view code = status_line.substr(9, 3);
  auto [ptr, ec] = std::from_chars(code.data(), code.data() + 3, *status);
  if (ec != std::errc() || ptr != code.data() + 3 || *status < 100) {
    *err = "bad status line: '" + std::string(status_line) + "'";
    return ParseStatus::kMalformed;
  }
  // Content-Length, wherever it is among the headers.
  long long length = -1;
  for (size_t pos = line_end + 2; pos < headers.size();) {
    size_t next = headers.find("\r\n", pos);
    std::string_view line = headers.substr(pos, next - pos);
    pos = next + 2;
    size_t colon = line.find(':');
    if (colon == std::string_view::npos ||
        !EqualsIgnoreCase(line.substr(0, colon), "content-length")) {
      continue;
    }
    std::string_view value = Trim(line.substr(colon + 1));
    auto [vptr, vec] = std::from_chars(value.data(), value.data() + value.size(), length);
    if (vec != std::errc() || vptr != value.data() + value.size() || length < 0) {
      *err = "bad Content-Length: '" + std::string(value) + "'";
      return ParseStatus::kMalformed;
    }
  }
  std::string_view rest = raw.substr(end_of_headers + 4);
  if (length < 0) {
    if (!at_eof) return ParseStatus::kIncomplete;
    *body = std::string(rest);
    return ParseStatus::kComplete;
  }
  if (rest.size() < static_cast<size_t>(length)) {
    if (!at_eof) return ParseStatus::kIncomplete;
    *err = "answer shorter than its Content-Length";
    return ParseStatus::kMalformed;
  }
  *body = std::string(rest.substr(0, static_cast<size_t>(length)));
  return ParseStatus::kComplete;
}

KvClient::KvClient(std::string address, int port, std::chrono::milliseconds io_timeout)
    : address_(std::move(address)), port_(port), io_timeout_(io_timeout) {}

bool KvClient::Request(std::string_view method, std::string_view key, std::string_view body,
                       int* status, std::string* response_body, std::string* err) {
  const std::string target = "/" + std::string(kSmokeScope) + "/" + std::string(key);
  const auto deadline = Clock::now() + io_timeout_;
  std::string why;
  Fd fd;
  if (!Connect(address_, port_, deadline, &fd, &why)) {
    *err = "rendezvous store: " + why;
    return false;
  }
  local_address_ = LocalAddress(fd);
  std::string request = std::string(method) + " " + target + " HTTP/1.1\r\nHost: " + address_ +
                        "\r\nContent-Length: " + std::to_string(body.size()) +
                        "\r\nConnection: close\r\n\r\n";
  request += body;
  if (!WriteAll(fd, request, deadline, &why)) {
    *err = "rendezvous store " + where() + ": " + std::string(method) + " " + target + ": " + why;
    return false;
  }
  std::string raw;
  for (bool eof = false;;) {
    switch (ParseHttpResponse(raw, eof, status, response_body, &why)) {
      case ParseStatus::kComplete:
        return true;
      case ParseStatus::kMalformed:
        *err = "rendezvous store " + where() + ": " + std::string(method) + " " + target + ": " +
               why;
        return false;
      case ParseStatus::kIncomplete:
        break;
    }
    if (!ReadSome(fd, &raw, deadline, &why)) {
      if (!why.empty()) {
        *err = "rendezvous store " + where() + ": " + std::string(method) + " " + target + ": " +
               why;
        return false;
      }
      eof = true;
    }
  }
}

bool KvClient::Put(std::string_view key, std::string_view value, std::string* err) {
  int status = 0;
  std::string body;
  if (!Request("PUT", key, value, &status, &body, err)) return false;
  if (status != 200) {
    *err = "rendezvous store " + where() + ": PUT " + std::string(key) + " answered " +
           std::to_string(status);
    return false;
  }
  return true;
}

bool KvClient::Get(std::string_view key, std::string* value, bool* found, std::string* err) {
  int status = 0;
  std::string body;
  if (!Request("GET", key, "", &status, &body, err)) return false;
  if (status == 404) {
    *found = false;
    return true;
  }
  if (status != 200) {
    *err = "rendezvous store " + where() + ": GET " + std::string(key) + " answered " +
           std::to_string(status);
    return false;
  }
  *found = true;
  *value = std::move(body);
  return true;
}

bool KvClient::WaitFor(std::string_view key, std::chrono::milliseconds timeout,
                       std::string* value, std::string* err) {
  const auto deadline = Clock::now() + timeout;
  // Back off from 1 ms to 10 ms (Gloo's own poll interval): peers usually publish within
  // milliseconds of each other, and a slow one costs the store at most 100 requests a second.
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    bool found = false;
    if (!Get(key, value, &found, err)) return false;
    if (found) return true;
    if (Clock::now() + pause > deadline) {
      *err = "timed out after " + FormatSeconds(timeout) + " waiting for " + std::string(key) +
             " in the rendezvous store " + where();
      return false;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(10));
  }
}

bool KvClient::Delete(std::string_view key, std::string* err) {
  int status = 0;
  std::string body;
  if (!Request("DELETE", key, "", &status, &body, err)) return false;
  if (status != 200) {
    *err = "rendezvous store " + where() + ": DELETE " + std::string(key) + " answered " +
           std::to_string(status);
    return false;
  }
  return true;
}

}  // namespace etrun::smoke
