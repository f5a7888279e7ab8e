#include "actors/modes/ist/ist_pieces.hpp"

#include <string>

#include <torch/torch.h>

#include "model/core/error.hpp"

namespace baton::actors {
inline namespace modes {
inline namespace ist {

namespace {

/// The shape of worker `worker`'s subnet tensor number `tensor`.
std::vector<int64_t> subnet_tensor_shape(const model::ist_shape& shape,
                                         const model::ist_partition& partition, int32_t worker,
                                         size_t tensor) {
  const size_t layers = shape.hidden.size();
  auto width = [&](size_t k) {
    return static_cast<int64_t>(partition.neurons(k, worker).size());
  };
  const size_t k = tensor / 3;
  if (tensor % 3 != 0)
    return {width(k)};
  const int64_t rows = k < layers ? width(k) : shape.classes;
  return {rows, k == 0 ? shape.inputs : width(k - 1)};
}

/// `shape` with `piece.dim` cut to the piece's positions.
std::vector<int64_t> piece_shape(std::vector<int64_t> shape, const model::ist_piece& piece) {
  shape.at(static_cast<size_t>(piece.dim)) = piece.positions.size();
  return shape;
}

void check_piece(const at::Tensor& t, const std::vector<int64_t>& want, const std::string& what) {
  if (!t.defined() || t.scalar_type() != at::kFloat || t.sizes() != at::IntArrayRef(want))
    throw model::error(what + ": expected a float tensor of shape " +
                       c10::str(at::IntArrayRef(want)) + ", got " +
                       (t.defined() ? c10::str(t.sizes()) + " " +
                                        std::string{c10::toString(t.scalar_type())}
                                    : std::string{"none"}));
}

} // namespace

model::ist_network ist_network_of(std::vector<at::Tensor> parameters) {
  if (parameters.size() % 3 != 1)
    throw model::error("ist: " + std::to_string(parameters.size()) +
                       " tensors are not a network (expected 3 per hidden layer + 1)");
  model::ist_network net;
  for (size_t i = 0; i < parameters.size(); ++i) {
    auto& into = i % 3 == 0 ? net.weights : i % 3 == 1 ? net.bn_weight : net.bn_bias;
    into.push_back(std::move(parameters[i]));
  }
  return net;
}

model::ist_partition ist_whole_partition(const model::ist_shape& shape) {
  model::ist_partition p;
  p.workers = 1;
  for (int64_t width : shape.hidden) {
    std::vector<int64_t> all(static_cast<size_t>(width));
    for (int64_t i = 0; i < width; ++i)
      all[static_cast<size_t>(i)] = i;
    p.parts.push_back({std::move(all)});
  }
  return p;
}

std::vector<at::Tensor> ist_take_pieces(const model::ist_network& whole,
                                        const model::ist_partition& partition, int32_t worker,
                                        const std::vector<model::ist_piece>& pieces) {
  std::vector<at::Tensor> out;
  for (const auto& piece : pieces)
    out.push_back(model::take_piece(whole, partition, worker, piece));
  return out;
}

void ist_put_pieces(model::ist_network& whole, const model::ist_partition& partition,
                    int32_t worker, const std::vector<model::ist_piece>& pieces,
                    const std::vector<at::Tensor>& values) {
  if (values.size() != pieces.size())
    throw model::error("ist: " + std::to_string(values.size()) + " tensors for " +
                       std::to_string(pieces.size()) + " pieces");
  const auto shape = whole.shape();
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto& piece = pieces[i];
    check_piece(values[i],
                piece_shape(subnet_tensor_shape(shape, partition, worker, piece.tensor), piece),
                "ist piece " + std::to_string(i));
    model::put_piece(whole, partition, worker, piece, values[i]);
  }
}

model::ist_network ist_assemble_subnet(const model::ist_shape& shape,
                                       const model::ist_partition& partition, int32_t worker,
                                       const std::vector<std::vector<at::Tensor>>& from_shards) {
  const auto shards = static_cast<int32_t>(from_shards.size());
  const size_t tensors = 3 * shape.hidden.size() + 1;
  std::vector<std::vector<at::Tensor>> parts(tensors);
  std::vector<int64_t> dims(tensors, 0);
  for (int32_t s = 0; s < shards; ++s) {
    const auto pieces = model::ist_shard_pieces(shape, partition, worker, s, shards);
    const auto& got = from_shards[static_cast<size_t>(s)];
    if (got.size() != pieces.size())
      throw model::error("ist: shard " + std::to_string(s) + " sent " +
                         std::to_string(got.size()) + " tensors, expected " +
                         std::to_string(pieces.size()));
    for (size_t i = 0; i < pieces.size(); ++i) {
      const auto& piece = pieces[i];
      check_piece(got[i],
                  piece_shape(subnet_tensor_shape(shape, partition, worker, piece.tensor), piece),
                  "ist: shard " + std::to_string(s) + "'s piece " + std::to_string(i));
      parts.at(piece.tensor).push_back(got[i]);
      dims[piece.tensor] = piece.dim;
    }
  }
  std::vector<at::Tensor> parameters;
  for (size_t i = 0; i < tensors; ++i)
    parameters.push_back(torch::cat(parts[i], dims[i]));
  return ist_network_of(std::move(parameters));
}

std::vector<at::Tensor> ist_split_subnet(const model::ist_network& subnet,
                                         const model::ist_shape& shape,
                                         const model::ist_partition& partition, int32_t worker,
                                         int32_t shard, int32_t shards) {
  const auto parameters = subnet.parameters();
  std::vector<at::Tensor> out;
  for (const auto& piece : model::ist_shard_pieces(shape, partition, worker, shard, shards))
    out.push_back(parameters.at(piece.tensor)
                    .detach()
                    .narrow(piece.dim, piece.positions.begin, piece.positions.size())
                    .clone(at::MemoryFormat::Contiguous));
  return out;
}

int64_t ist_owned_elements(const model::ist_shape& shape, int32_t shard, int32_t shards) {
  int64_t n = 0;
  for (const auto& piece : model::ist_shard_pieces(shape, ist_whole_partition(shape), 0, shard,
                                                   shards))
    n += piece.elements;
  return n;
}

} // namespace ist
} // namespace modes
} // namespace baton::actors
