#include "model/ist/ist.hpp"

#include <algorithm>
#include <random>

#include <torch/torch.h>

#include "model/core/augment.hpp"
#include "model/core/epoch_selection.hpp"
#include "model/core/error.hpp"
#include "model/core/optimizer.hpp"
#include "model/core/batches.hpp"
#include "model/core/non_finite.hpp"
#include "model/core/random.hpp"

namespace baton::model::ist {

namespace {

at::Tensor index_tensor(const std::vector<int64_t>& ids) {
  return torch::tensor(ids, torch::kLong);
}

void check_workers(const std::vector<int64_t>& hidden, int32_t count, const char* what) {
  for (int64_t width : hidden)
    if (count < 1 || count > width)
      throw error(std::string("ist: expected 1 <= ") + what + " <= every hidden width, got " +
                  std::to_string(count) + " for a layer of " + std::to_string(width));
}

/// The subnet's hidden widths: every worker's part sizes.
std::vector<int64_t> subnet_widths(const partition& partition, int32_t worker) {
  std::vector<int64_t> out;
  for (size_t k = 0; k < partition.parts.size(); ++k)
    out.push_back(static_cast<int64_t>(partition.neurons(k, worker).size()));
  return out;
}

/// Positions of `sorted` whose values lie in `range`: contiguous, as the
/// part is sorted and the range is.
neuron_range positions_in(const std::vector<int64_t>& sorted, const neuron_range& range) {
  const auto begin = std::lower_bound(sorted.begin(), sorted.end(), range.begin);
  const auto end = std::lower_bound(begin, sorted.end(), range.end);
  return {begin - sorted.begin(), end - sorted.begin()};
}

/// Throws unless `subnet` has the shapes of worker `worker`'s slice of `whole`.
void check_subnet_shape(const network& whole, const network& subnet,
                        const partition& partition, int32_t worker) {
  const auto widths = subnet_widths(partition, worker);
  if (subnet.hidden_layers() != widths.size() || subnet.weights.size() != widths.size() + 1 ||
      whole.hidden_layers() != widths.size())
    throw error("ist write-back: a subnet of " + std::to_string(subnet.hidden_layers()) +
                " hidden layers, expected " + std::to_string(widths.size()));
  std::vector<std::vector<int64_t>> want;
  int64_t previous = whole.weights.front().size(1);
  for (int64_t h : widths) {
    want.insert(want.end(), {{h, previous}, {h}, {h}});
    previous = h;
  }
  want.push_back({whole.weights.back().size(0), previous});
  const auto got = subnet.parameters();
  const auto names = subnet.parameter_names();
  for (size_t i = 0; i < want.size(); ++i)
    if (got[i].sizes() != at::IntArrayRef(want[i]))
      throw error("ist write-back: " + names[i] + " has shape " + c10::str(got[i].sizes()) +
                  ", expected " + c10::str(at::IntArrayRef(want[i])));
}

} // namespace

// -- partitions ------------------------------------------------------------------

std::vector<int64_t> permutation(int64_t width, uint64_t seed, int64_t round, size_t layer) {
  std::vector<int64_t> order(static_cast<size_t>(std::max<int64_t>(width, 0)));
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = static_cast<int64_t>(i);
  std::mt19937_64 rng(derive_seed(
      seed, "ist-partition/" + std::to_string(round) + "/" + std::to_string(layer)));
  for (size_t i = order.size(); i > 1; --i)
    std::swap(order[i - 1], order[static_cast<size_t>(uniform_below(rng, i))]);
  return order;
}

neuron_range cut(int64_t width, int32_t index, int32_t count) {
  if (count < 1 || count > width || index < 0 || index >= count)
    throw error("ist: part " + std::to_string(index) + " of " + std::to_string(count) +
                " of " + std::to_string(width) + " neurons: expected 1 <= count <= width and "
                "0 <= index < count");
  const int64_t base = width / count, extra = width % count;
  const int64_t begin = index * base + std::min<int64_t>(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

const std::vector<int64_t>& partition::neurons(size_t layer, int32_t worker) const {
  return parts.at(layer).at(static_cast<size_t>(worker));
}

partition make_partition(const std::vector<int64_t>& hidden, int32_t workers,
                         uint64_t seed, int64_t round) {
  check_workers(hidden, workers, "workers");
  partition p;
  p.round = round;
  p.workers = workers;
  for (size_t k = 0; k < hidden.size(); ++k) {
    const auto order = permutation(hidden[k], seed, round, k);
    auto& layer = p.parts.emplace_back();
    for (int32_t w = 0; w < workers; ++w) {
      const auto range = cut(hidden[k], w, workers);
      auto& part = layer.emplace_back(order.begin() + range.begin, order.begin() + range.end);
      std::sort(part.begin(), part.end());
    }
  }
  return p;
}

// -- subnets ---------------------------------------------------------------------

network slice_subnet(const network& whole, const partition& partition,
                     int32_t worker) {
  torch::NoGradGuard no_grad;
  const size_t layers = whole.hidden_layers();
  network sub;
  at::Tensor previous; // the worker's neurons of the layer below (none for the input)
  for (size_t k = 0; k <= layers; ++k) {
    at::Tensor w = whole.weights[k].detach();
    if (k < layers) {
      const auto rows = index_tensor(partition.neurons(k, worker));
      w = w.index_select(0, rows);
      sub.bn_weight.push_back(whole.bn_weight[k].detach().index_select(0, rows));
      sub.bn_bias.push_back(whole.bn_bias[k].detach().index_select(0, rows));
      if (previous.defined())
        w = w.index_select(1, previous);
      previous = rows;
    } else {
      w = w.index_select(1, previous);
    }
    sub.weights.push_back(w.contiguous());
  }
  return sub;
}

void write_back_subnet(network& whole, const network& subnet,
                       const partition& partition, int32_t worker) {
  torch::NoGradGuard no_grad;
  check_subnet_shape(whole, subnet, partition, worker);
  const size_t layers = whole.hidden_layers();
  at::Tensor previous;
  for (size_t k = 0; k <= layers; ++k) {
    at::Tensor target = whole.weights[k].detach();
    const at::Tensor values = subnet.weights[k].detach();
    if (k == layers) {
      target.index_copy_(1, previous, values);
      break;
    }
    const auto rows = index_tensor(partition.neurons(k, worker));
    whole.bn_weight[k].detach().index_copy_(0, rows, subnet.bn_weight[k].detach());
    whole.bn_bias[k].detach().index_copy_(0, rows, subnet.bn_bias[k].detach());
    if (previous.defined()) {
      // The diagonal block only: the rows' other columns keep their values.
      auto block_rows = target.index_select(0, rows);
      block_rows.index_copy_(1, previous, values);
      target.index_copy_(0, rows, block_rows);
    } else {
      target.index_copy_(0, rows, values);
    }
    previous = rows;
  }
}

// -- shards ----------------------------------------------------------------------

neuron_range shard_neurons(int64_t width, int32_t shard, int32_t shards) {
  return cut(width, shard, shards);
}

std::vector<piece> shard_pieces(const shape& shape, const partition& partition,
                                int32_t worker, int32_t shard, int32_t shards) {
  check_workers(shape.hidden, shards, "shards");
  const auto widths = subnet_widths(partition, worker);
  const size_t layers = widths.size();
  std::vector<piece> out;
  auto add = [&](size_t tensor, int64_t dim, size_t layer, int64_t other) {
    const auto owned = shard_neurons(shape.hidden[layer], shard, shards);
    const auto positions = positions_in(partition.neurons(layer, worker), owned);
    out.push_back({tensor, dim, layer, positions, positions.size() * other});
  };
  for (size_t k = 0; k < layers; ++k) {
    const size_t first = 3 * k; // fc(k+1), bn(k+1).weight, bn(k+1).bias
    if (k == 0)
      add(first, 0, 0, shape.inputs); // incoming rows of the first hidden layer
    else
      add(first, 1, k - 1, widths[k]); // outgoing columns of layer k-1's neurons
    add(first + 1, 0, k, 1);
    add(first + 2, 0, k, 1);
  }
  add(3 * layers, 1, layers - 1, shape.classes);
  return out;
}

namespace {

/// The whole-network tensor a piece is in, the global indices along its dim,
/// and the worker's rows when it is a hidden-to-hidden block (undefined
/// otherwise).
struct piece_indices {
  at::Tensor along;
  at::Tensor rows;
};

piece_indices indices_of(const network& whole, const partition& partition,
                         int32_t worker, const piece& piece) {
  const auto& neurons = partition.neurons(piece.layer, worker);
  if (piece.layer >= whole.hidden_layers() || piece.positions.begin < 0 ||
      piece.positions.end > static_cast<int64_t>(neurons.size()) ||
      piece.tensor >= 3 * whole.hidden_layers() + 1)
    throw error("ist piece: tensor " + std::to_string(piece.tensor) + " layer " +
                std::to_string(piece.layer) + " does not fit the network or the partition");
  piece_indices out;
  out.along = index_tensor(std::vector<int64_t>(neurons.begin() + piece.positions.begin,
                                                neurons.begin() + piece.positions.end));
  const size_t k = piece.tensor / 3; // fc(k+1) when tensor % 3 == 0
  if (piece.tensor % 3 == 0 && k > 0 && k < whole.hidden_layers())
    out.rows = index_tensor(partition.neurons(k, worker));
  return out;
}

} // namespace

at::Tensor take_piece(const network& whole, const partition& partition, int32_t worker,
                      const piece& piece) {
  torch::NoGradGuard no_grad;
  const auto index = indices_of(whole, partition, worker, piece);
  auto t = whole.parameters()[piece.tensor].detach();
  if (index.rows.defined())
    t = t.index_select(0, index.rows);
  return t.index_select(piece.dim, index.along).contiguous();
}

void put_piece(network& whole, const partition& partition, int32_t worker,
               const piece& piece, const at::Tensor& values) {
  torch::NoGradGuard no_grad;
  const auto index = indices_of(whole, partition, worker, piece);
  auto target = whole.parameters()[piece.tensor].detach();
  if (!index.rows.defined()) {
    target.index_copy_(piece.dim, index.along, values.detach());
    return;
  }
  auto rows = target.index_select(0, index.rows);
  rows.index_copy_(piece.dim, index.along, values.detach());
  target.index_copy_(0, index.rows, rows);
}

// -- bytes -----------------------------------------------------------------------

int64_t subnet_elements(const shape& shape, const partition& partition,
                        int32_t worker) {
  const auto widths = subnet_widths(partition, worker);
  int64_t n = 0, previous = shape.inputs;
  for (int64_t h : widths) {
    n += h * previous + 2 * h;
    previous = h;
  }
  return n + shape.classes * previous;
}

double bytes_formula(const shape& shape, int32_t workers) {
  const double w = workers;
  const auto& h = shape.hidden;
  double elements = static_cast<double>(shape.inputs * h.front()) / w +
                    static_cast<double>(shape.classes * h.back()) / w;
  for (size_t k = 0; k < h.size(); ++k) {
    elements += 2.0 * static_cast<double>(h[k]) / w;
    if (k > 0)
      elements += static_cast<double>(h[k] * h[k - 1]) / (w * w);
  }
  return elements * static_cast<double>(sizeof(float));
}

// -- data and local steps ----------------------------------------------------------

int64_t steps_per_epoch(int64_t dataset_size, int64_t batch_size, int32_t workers) {
  if (dataset_size <= 0 || batch_size < 2 || workers < 1)
    throw error("ist: expected a non-empty dataset, batch_size >= 2 and workers >= 1");
  const int64_t steps = dataset_size / batch_size / workers;
  if (steps == 0)
    throw error("ist: " + std::to_string(dataset_size) + " samples make no step of " +
                std::to_string(workers) + " workers x " + std::to_string(batch_size));
  return steps;
}

round_steps steps_of_round(int64_t round, int64_t steps_per_epoch, int32_t local_steps,
                           int64_t epochs) {
  const int64_t rounds = rounds_per_epoch(steps_per_epoch, local_steps);
  return {round / rounds * steps_per_epoch + round % rounds * local_steps, steps_per_epoch,
          epochs};
}

round_steps schedule_of(const optimizer_spec& optimizer, int64_t round, int64_t train_size,
                        int64_t batch_size, int32_t workers, int32_t local_steps,
                        int64_t epochs) {
  if (!optimizer.scheduled())
    return {};
  return steps_of_round(round, steps_per_epoch(train_size, batch_size, workers), local_steps,
                        epochs);
}

int64_t rounds_per_epoch(int64_t steps_per_epoch, int32_t local_steps) {
  if (steps_per_epoch < 1 || local_steps < 1)
    throw error("ist: expected steps per epoch and local_steps >= 1");
  return (steps_per_epoch + local_steps - 1) / local_steps;
}

std::vector<std::vector<int64_t>> worker_minibatches(int64_t dataset_size, uint64_t seed,
                                                     int32_t epoch, int32_t worker,
                                                     int32_t workers, int64_t batch_size) {
  if (worker < 0 || worker >= workers)
    throw error("ist: worker " + std::to_string(worker) + " of " + std::to_string(workers));
  const int64_t steps = steps_per_epoch(dataset_size, batch_size, workers);
  const auto order =
      epoch_order(dataset_size, derive_seed(seed, "ist-data/" + std::to_string(worker)), epoch);
  std::vector<std::vector<int64_t>> out;
  for (int64_t s = 0; s < steps; ++s)
    out.emplace_back(order.begin() + s * batch_size, order.begin() + (s + 1) * batch_size);
  return out;
}

namespace {

/// torch::optim::SGD::step's arithmetic for one parameter, in place. Call
/// under NoGradGuard.
void sgd_update(const at::Tensor& parameter, const at::Tensor& gradient, at::Tensor& momentum,
                const optimizer_spec& optimizer, double lr) {
  auto d_p = gradient;
  if (optimizer.weight_decay != 0)
    d_p = d_p.add(parameter, optimizer.weight_decay);
  if (optimizer.momentum != 0) {
    if (!momentum.defined())
      momentum = torch::clone(d_p).detach();
    else
      momentum.mul_(optimizer.momentum).add_(d_p, 1.0);
    d_p = momentum;
  }
  parameter.add_(d_p, -lr);
}

} // namespace

local_result sgd_steps(const std::vector<at::Tensor>& parameters, const dataset& train,
                       const std::vector<std::vector<int64_t>>& minibatches, int32_t epoch,
                       const optimizer_spec& optimizer, const minibatch_loss& loss,
                       const round_steps& at) {
  std::vector<at::Tensor> momentum(parameters.size()); // reset: a fresh optimizer per round
  local_result out;
  for (const auto& ids : minibatches) {
    auto [images, labels] = gather_training(train, ids, epoch);
    const auto l = loss(images, labels);
    // One watch per thread (workers train in parallel): each warns once.
    thread_local non_finite_watch watch{"IST's local steps"};
    watch.check(l.item<double>(), parameters, images);
    const auto gradients = torch::autograd::grad({l}, parameters);
    {
      torch::NoGradGuard no_grad;
      const double lr = at.per_epoch > 0
                          ? lr_at(optimizer, at.first + out.steps, at.per_epoch, at.epochs)
                          : optimizer.lr;
      for (size_t i = 0; i < parameters.size(); ++i)
        sgd_update(parameters[i], gradients[i], momentum[i], optimizer, lr);
    }
    out.loss_sum += l.item<double>() * static_cast<double>(ids.size());
    out.samples += static_cast<int64_t>(ids.size());
    ++out.steps;
  }
  return out;
}

local_result local_steps(network& subnet, const dataset& train,
                         const std::vector<std::vector<int64_t>>& minibatches,
                         int32_t epoch, const optimizer_spec& optimizer,
                         const round_steps& at) {
  auto parameters = subnet.parameters();
  for (auto& p : parameters)
    p.requires_grad_(true);
  const auto out = sgd_steps(parameters, train, minibatches, epoch, optimizer,
                             [&](const at::Tensor& images, const at::Tensor& labels) {
                               return loss(forward(subnet, images), labels);
                             },
                             at);
  for (auto& p : parameters)
    p.requires_grad_(false);
  return out;
}

// -- the local reference -------------------------------------------------------

namespace {

void check_spec(const dataset& train, const settings& spec) {
  if (spec.epochs < 0 || spec.local_steps < 1 || spec.eval_batch < 1)
    throw error("ist: expected epochs >= 0, local_steps >= 1 and eval_batch >= 1");
  check_workers(spec.shape.hidden, spec.workers, "workers");
  if (train.size() > 0 && train.images.numel() / train.size() != spec.shape.inputs)
    throw error("ist: samples of " + std::to_string(train.images.numel() / train.size()) +
                " values, expected shape.inputs = " + std::to_string(spec.shape.inputs));
  steps_per_epoch(train.size(), spec.batch_size, spec.workers);
}

/// One round: every worker's subnet sliced from `whole` as it is, trained on
/// its minibatches, written back.
local_result run_round(network& whole, const dataset& train, const settings& spec,
                       const partition& partition, const round_minibatches& minibatches,
                       int32_t epoch, const round_steps& at, result& result) {
  std::vector<network> subnets;
  for (int32_t w = 0; w < spec.workers; ++w)
    subnets.push_back(slice_subnet(whole, partition, w));
  local_result sum;
  for (int32_t w = 0; w < spec.workers; ++w) {
    const auto r = local_steps(subnets[static_cast<size_t>(w)], train,
                               minibatches[static_cast<size_t>(w)], epoch, spec.optimizer, at);
    sum.loss_sum += r.loss_sum;
    sum.samples += r.samples;
    result.exchanged_elements[static_cast<size_t>(w)] +=
        subnet_elements(spec.shape, partition, w);
  }
  for (int32_t w = 0; w < spec.workers; ++w)
    write_back_subnet(whole, subnets[static_cast<size_t>(w)], partition, w);
  return sum;
}

void run_epoch(network& whole, const dataset& train, const settings& spec, int32_t epoch,
               result& result) {
  run_reference_epoch(train, spec, epoch, result,
                      [&](int64_t round, const round_minibatches& minibatches) {
                        const auto partition =
                            make_partition(spec.shape.hidden, spec.workers, spec.seed, round);
                        const auto at =
                          schedule_of(spec.optimizer, round, train.size(), spec.batch_size,
                                      spec.workers, spec.local_steps, spec.epochs);
                        return run_round(whole, train, spec, partition, minibatches, epoch, at,
                                         result);
                      });
}

} // namespace

result run_local(const dataset& train, const dataset& test, const settings& spec) {
  return run_local(data_splits{train, {}, test}, spec);
}

result run_local(const data_splits& data, const settings& spec) {
  const dataset& train = data.train;
  check_spec(train, spec);
  result result;
  result.exchanged_elements.assign(static_cast<size_t>(spec.workers), 0);
  network whole = make_network(spec.shape, spec.seed);
  epoch_selection selection(spec.selection.patience);
  for (int32_t epoch = 0; epoch < spec.epochs; ++epoch) {
    run_epoch(whole, train, spec, epoch, result);
    const auto evaluation = evaluate(whole, data.test, spec.eval_batch);
    result.test_loss.push_back(evaluation.loss);
    result.test_accuracy.push_back(evaluation.accuracy);
    if (data.validation.size() == 0)
      continue;
    result.validation_accuracy.push_back(
      evaluate(whole, data.validation, spec.eval_batch).accuracy);
    if (selection.add(epoch, result.validation_accuracy.back()) && spec.selection.keep_best)
      result.best_network = whole.clone();
    result.best_epoch = selection.best_epoch();
    if (selection.exhausted())
      break;
  }
  result.weights_digest = digest(whole);
  result.network = whole;
  return result;
}

} // namespace baton::model::ist
