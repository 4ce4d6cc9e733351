#include "rendezvous/notifier.h"

#include <ctime>
#include <memory>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <spdlog/spdlog.h>

#include "rendezvous/wire.h"

namespace etrun::rendezvous {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

class FrameExchange : public std::enable_shared_from_this<FrameExchange> {
 public:
  using Done = std::function<void(bool, std::string, std::string)>;
  FrameExchange(asio::io_context* io, std::string key, std::string request, Done done)
      : socket_(*io), timer_(*io), decoder_(key), request_(std::move(request)), done_(std::move(done)) {}

  void Start(const std::string& ip, int port, std::chrono::milliseconds timeout) {
    boost::system::error_code ec;
    auto address = asio::ip::make_address_v4(ip, ec);
    if (ec) return Finish(false, "", "'" + ip + "' is not an IPv4 address");
    auto self = shared_from_this();
    timer_.expires_after(timeout);
    timer_.async_wait([self](const boost::system::error_code& e) {
      if (!e) self->Finish(false, "", "no reply in time");
    });
    socket_.async_connect(tcp::endpoint(address, static_cast<unsigned short>(port)),
                          [self](const boost::system::error_code& e) {
                            if (e) return self->Finish(false, "", "connect: " + e.message());
                            asio::async_write(self->socket_, asio::buffer(self->request_),
                                              [self](const boost::system::error_code& w, size_t) {
                                                if (w) return self->Finish(false, "", "send: " + w.message());
                                                self->Read();
                                              });
                          });
  }

 private:
  void Read() {
    auto self = shared_from_this();
    size_t want = std::min(decoder_.bytes_wanted(), sizeof(buffer_));
    socket_.async_read_some(asio::buffer(buffer_, want), [self](const boost::system::error_code& e, size_t n) {
      if (self->finished_) return;
      std::string err;
      size_t consumed = 0;
      FrameStatus status = self->decoder_.Feed(std::string_view(self->buffer_, n), &consumed, &err);
      if (status == FrameStatus::kComplete) return self->Finish(true, self->decoder_.body(), "");
      if (status == FrameStatus::kError) return self->Finish(false, "", err);
      if (e) return self->Finish(false, "", "connection closed before the reply");
      self->Read();
    });
  }

  void Finish(bool ok, std::string body, std::string err) {
    if (finished_) return;
    finished_ = true;
    timer_.cancel();
    boost::system::error_code ignored;
    socket_.close(ignored);
    done_(ok, std::move(body), std::move(err));
  }

  tcp::socket socket_;
  asio::steady_timer timer_;
  FrameDecoder decoder_;
  std::string request_;
  Done done_;
  char buffer_[4096];
  bool finished_ = false;
};

// Calls f after `delay` on the io_context.
void After(asio::io_context* io, std::chrono::milliseconds delay, std::function<void()> f) {
  auto timer = std::make_shared<asio::steady_timer>(*io, delay);
  timer->async_wait([timer, f](const boost::system::error_code&) { f(); });
}

}  // namespace

void ExchangeFrame(asio::io_context* io, const std::string& ip, int port, const std::string& key,
                   std::string request_frame, std::chrono::milliseconds timeout,
                   std::function<void(bool, std::string, std::string)> done) {
  std::make_shared<FrameExchange>(io, key, std::move(request_frame), std::move(done))
      ->Start(ip, port, timeout);
}

Notifier::Notifier(asio::io_context* io, NotifierOptions options) : io_(io), options_(options) {}

bool Notifier::IsRegistered(const std::string& host, int local_rank) const {
  return workers_.count({host, local_rank}) > 0;
}

int64_t Notifier::NextTimestamp() {
  last_timestamp_ = std::max<int64_t>(static_cast<int64_t>(std::time(nullptr)), last_timestamp_ + 1);
  return last_timestamp_;
}

struct Notifier::Registering {
  std::vector<SocketAddress> probes;
  std::string key;
  std::pair<std::string, int> slot;
  Done done;
  size_t outstanding = 0;
  bool finished = false;
  std::string last_error;
};

void Notifier::Register(const WorkerRegistration& reg, Done done) {
  // One probe per (ip, port), all at once; the first good answer wins (spec §5.3).
  auto state = std::make_shared<Registering>();
  for (const InterfaceAddresses& iface : reg.addresses) {
    for (const SocketAddress& a : iface.addresses) state->probes.push_back(a);
  }
  if (state->probes.empty()) return done(false, "the worker listed no address");
  state->key = reg.key;
  state->slot = {reg.host, reg.local_rank};
  state->done = std::move(done);
  state->outstanding = state->probes.size();
  for (size_t i = 0; i < state->probes.size(); ++i) Probe(state, i, 0);
}

void Notifier::Probe(std::shared_ptr<Registering> state, size_t index, int attempt) {
  const SocketAddress& a = state->probes[index];
  ExchangeFrame(io_, a.ip, a.port, state->key, EncodePingRequestFrame(state->key), options_.timeout,
                [this, state, index, attempt](bool ok, std::string body, std::string err) {
                  if (state->finished) return;
                  const SocketAddress& p = state->probes[index];
                  std::string service, source;
                  if (ok && !DecodePingResponse(body, &service, &source, &err)) ok = false;
                  if (ok && service != kWorkerServiceName) {
                    ok = false;
                    err = "answered as '" + service + "'";
                  }
                  if (ok) {
                    state->finished = true;
                    workers_[state->slot] = Worker{p.ip, p.port, state->key};
                    spdlog::debug("worker {}[{}] is notifiable at {}:{}", state->slot.first,
                                  state->slot.second, p.ip, p.port);
                    return state->done(true, "");
                  }
                  state->last_error = p.ip + ":" + std::to_string(p.port) + ": " + err;
                  if (attempt + 1 < options_.attempts) {
                    return After(io_, options_.retry_delay,
                                 [this, state, index, attempt] { Probe(state, index, attempt + 1); });
                  }
                  if (--state->outstanding == 0) {
                    state->finished = true;
                    state->done(false, "no address answered the ping (last: " + state->last_error + ")");
                  }
                });
}

void Notifier::Notify(const std::string& host, int local_rank, int64_t timestamp,
                      HostUpdateResult res, Done done) {
  auto it = workers_.find({host, local_rank});
  if (it == workers_.end()) return done(false, "worker " + host + "[" + std::to_string(local_rank) + "] is not registered");
  SendNotification(it->second, EncodeHostsUpdatedFrame(it->second.key, timestamp, res), 0, std::move(done));
}

void Notifier::SendNotification(const Worker& worker, std::string frame, int attempt, Done done) {
  ExchangeFrame(io_, worker.ip, worker.port, worker.key, frame, options_.timeout,
                [this, worker, frame, attempt, done](bool ok, std::string body, std::string err) {
                  if (ok && !DecodeAckResponse(body, &err)) ok = false;
                  if (ok) return done(true, "");
                  if (attempt + 1 < options_.attempts) {
                    return After(io_, options_.retry_delay, [this, worker, frame, attempt, done] {
                      SendNotification(worker, frame, attempt + 1, done);
                    });
                  }
                  done(false, worker.ip + ":" + std::to_string(worker.port) + ": " + err);
                });
}

}  // namespace etrun::rendezvous
