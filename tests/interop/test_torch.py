"""adc.torch: the samples' kernels as PyTorch operators — gradcheck and gradgradcheck in float64
against finite differences, torch.library.opcheck, torch.compile(fullgraph=True) of an nn.Module,
torch.func.grad and vmap (the batching pass's kernel, one call per batch), torch.func.jvp and
jacfwd (the JVP kernel), and the errors that name a parameter."""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import adc  # noqa: E402
import adc.torch  # noqa: E402
from tests.support.sample_arguments import arguments, sample_kernels  # noqa: E402

F32 = sample_kernels("f32")
F64 = sample_kernels("f64")
DIFFERENTIABLE = [name for name, k in F64.items() if k.derivative().wrt]


def tensors(kernel, seed=0, requires_grad=False):
    return [torch.from_numpy(a).requires_grad_(requires_grad and a.dtype.kind == "f") for a in arguments(kernel, seed)]


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_gradcheck_and_gradgradcheck_in_float64(name):
    op = adc.torch.op(F64[name])
    args = tensors(F64[name], requires_grad=True)
    assert torch.autograd.gradcheck(op, args)
    assert torch.autograd.gradgradcheck(op, args)


@pytest.mark.parametrize("name", sorted(F32))
def test_opcheck(name):
    op = adc.torch.op(F32[name])
    args = tensors(F32[name], requires_grad=name in DIFFERENTIABLE)
    result = torch.library.opcheck(op.op, args)
    assert set(result.values()) == {"SUCCESS"}, result


def test_results_equal_the_kernels_and_share_no_buffer_with_the_inputs():
    kernel = F32["dense_relu"]
    args = tensors(kernel)
    out = adc.torch.op(kernel)(*args)
    np.testing.assert_array_equal(out.numpy(), kernel(*(a.numpy() for a in args)).numpy())
    out += 1        # a result is torch's to write to



def test_an_eager_call_hands_the_kernel_the_tensors_memory(monkeypatch):
    """Results from torch's allocator and the arguments' data passed by address (Kernel.run_at), no
    adc Tensor made of either; a kernel that reads index values first takes adc Tensors over them,
    as does any call the op gets with a wrong dtype (which the kernel's checks then name)."""
    viewed = []
    view = adc.torch._view
    monkeypatch.setattr(adc.torch, "_view", lambda t: viewed.append(t) or view(t))
    kernel = F32["dense_relu"]
    args = tensors(kernel)
    out = adc.torch.op(kernel)(*args)
    assert viewed == []
    np.testing.assert_array_equal(out.numpy(), kernel(*(a.numpy() for a in args)).numpy())
    indexed = F32["embedding_loss"]
    assert indexed.checks_indices
    torch.testing.assert_close(adc.torch.op(indexed)(*tensors(indexed)),
                               torch.from_numpy(indexed(*arguments(indexed, 0)).numpy()))
    assert len(viewed) == 3
    with pytest.raises(TypeError, match="parameter 'x' expects dtype"):
        adc.torch.op(F64["logsumexp_rows"]).op(torch.zeros(3, 4))


class Classifier(torch.nn.Module):
    def __init__(self, loss):
        super().__init__()
        self.linear = torch.nn.Linear(6, 3)
        self.loss = loss

    def forward(self, x, labels):
        return self.loss(self.linear(torch.relu(x)), labels)


def test_an_eager_loss_runs_one_kernel_for_its_value_and_gradient(monkeypatch):
    """Forward runs the value-and-gradient kernel, backward no kernel (it scales the gradient);
    a backward that builds a graph runs the VJP kernel, so double backward still works."""
    kernel = F64["cross_entropy"]
    op = adc.torch.op(kernel)
    logits, labels = tensors(kernel, requires_grad=True)
    called = []
    native = adc.torch._native
    monkeypatch.setattr(adc.torch, "_native", lambda k, *rest: called.append(k.signature.name) or native(k, *rest))
    loss = op(logits, labels)
    (3.0 * loss).backward()
    assert called == ["cross_entropy_value_and_grad"]
    expected = logits.detach().clone().requires_grad_()
    (3.0 * torch.nn.functional.cross_entropy(expected, labels)).backward()
    torch.testing.assert_close(loss, torch.nn.functional.cross_entropy(expected, labels))
    torch.testing.assert_close(logits.grad, expected.grad)
    (grad,) = torch.autograd.grad(op(logits, labels), logits, create_graph=True)
    assert called[1:] == ["cross_entropy_value_and_grad", "cross_entropy_vjp"] and grad.requires_grad


def test_an_eager_loss_differentiates_the_params_each_call_asks_for():
    """The value-and-gradient kernel is kept per set of params needing a gradient: calls asking
    for different ones, in turn, each get theirs and only theirs."""
    kernel = F64["classifier_loss"]
    op = adc.torch.op(kernel)
    for wanted in ({1}, {0, 2}, {1}, {0, 1, 2}):
        args = tensors(kernel)
        for i in wanted:
            args[i].requires_grad_()
        op(*args).backward()
        expected = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
        x, w, b, labels = expected
        torch.nn.functional.cross_entropy(x @ w + b, labels).backward()
        for i, (got, want) in enumerate(zip(args, expected)):
            assert (got.grad is None) == (i not in wanted)
            if i in wanted:
                torch.testing.assert_close(got.grad, want.grad)


def test_an_eager_loss_seeded_with_one_hands_on_its_gradients_and_they_accumulate():
    """loss.backward()'s seed of one passes the gradients on unscaled; a second backward over the
    retained graph adds the same again (autograd keeps its own copy in .grad)."""
    kernel = F64["cross_entropy"]
    logits, labels = tensors(kernel, requires_grad=True)
    loss = adc.torch.op(kernel)(logits, labels)
    loss.backward(retain_graph=True)
    first = logits.grad.clone()
    loss.backward()
    expected = logits.detach().clone().requires_grad_()
    torch.nn.functional.cross_entropy(expected, labels).backward()
    torch.testing.assert_close(first, expected.grad)
    torch.testing.assert_close(logits.grad, 2 * expected.grad)


def test_torch_compile_fullgraph_of_a_module_calling_an_adc_op():
    torch.manual_seed(0)
    model = Classifier(adc.torch.op(F32["cross_entropy"]))
    x, labels = torch.randn(8, 6), torch.randint(0, 3, (8,))
    assert torch._dynamo.explain(model)(x, labels).graph_break_count == 0
    loss = torch.compile(model, fullgraph=True)(x, labels)
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    expected = torch.nn.functional.cross_entropy(model.linear(torch.relu(x)), labels)
    expected.backward()
    torch.testing.assert_close(loss, expected)
    for got, want in zip(grads, (p.grad for p in model.parameters())):
        torch.testing.assert_close(got, want)


def test_func_grad_and_its_grad_agree_with_autograd():
    op = adc.torch.op(F64["sigmoid_shift"])
    x, delta = tensors(F64["sigmoid_shift"])
    f = lambda d: op(x, d).sum()  # noqa: E731
    s = torch.sigmoid(x + delta)
    torch.testing.assert_close(torch.func.grad(f)(delta), (s * (1 - s)).sum())
    torch.testing.assert_close(torch.func.grad(torch.func.grad(f))(delta), (s * (1 - s) * (1 - 2 * s)).sum())


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_jacfwd_through_the_jvp_kernel_equals_jacrev(name):
    op = adc.torch.op(F64[name])
    args = tensors(F64[name])
    floats = tuple(i for i, a in enumerate(args) if a.is_floating_point())
    forward = torch.func.jacfwd(op, argnums=floats)(*args)
    reverse = torch.func.jacrev(op, argnums=floats)(*args)
    torch.testing.assert_close(forward, reverse, rtol=1e-12, atol=1e-12)


def test_jvp_of_each_order_agrees_with_the_formula():
    """Forward over forward and forward over reverse: the JVP kernel's own Function and the VJP's."""
    op = adc.torch.op(F64["sigmoid_shift"])
    x, delta = tensors(F64["sigmoid_shift"])
    s = torch.sigmoid(x + delta)
    value, tangent = torch.func.jvp(lambda d: op(x, d), (delta,), (torch.tensor(2.0, dtype=torch.float64),))
    torch.testing.assert_close((value, tangent), (s, 2 * s * (1 - s)))
    second = s * (1 - s) * (1 - 2 * s)
    torch.testing.assert_close(torch.func.jacfwd(torch.func.jacfwd(op, argnums=1), argnums=1)(x, delta), second)
    torch.testing.assert_close(torch.func.jacfwd(torch.func.jacrev(op, argnums=1), argnums=1)(x, delta), second)


def test_a_call_inside_a_transform_on_arguments_it_does_not_wrap():
    """Under torch.func.grad, arguments that need gradients but are not the transform's own."""
    m = adc.compile("def f(x: f64[N], y: f64[N]) -> f64:\n    return sum(x * y)\n")
    op = adc.torch.op(m.f)
    w, c = (torch.randn(4, dtype=torch.float64, requires_grad=True) for _ in range(2))
    x = torch.randn(3, dtype=torch.float64)
    torch.testing.assert_close(torch.func.grad(lambda x: (x * op(w, c)).sum())(x), (w * c).sum().detach().expand(3))


def test_forward_mode_with_dual_tensors_in_eager_code():
    """torch.autograd.forward_ad outside torch.func: the Function's jvp, the JVP kernel."""
    from torch.autograd import forward_ad
    op = adc.torch.op(F64["sigmoid_shift"])
    x, delta = tensors(F64["sigmoid_shift"])
    s = torch.sigmoid(x + delta)
    with forward_ad.dual_level():
        out = op(x, forward_ad.make_dual(delta, torch.tensor(2.0, dtype=torch.float64)))
        torch.testing.assert_close(forward_ad.unpack_dual(out).tangent, 2 * s * (1 - s))


def test_jvp_where_the_tangent_passes_through_and_of_an_integer_result():
    m = adc.compile("def f(x: f64[N], y: f64[N]) -> (f64[N], i64):\n    return x + y, argmax(x, axis=0)\n")
    op = adc.torch.op(m.f)
    x, y = torch.randn(4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    dx = torch.randn(4, dtype=torch.float64)
    (total, index), (d_total, d_index) = torch.func.jvp(lambda x: op(x, y), (x,), (dx,))
    torch.testing.assert_close(d_total, dx)
    assert index.item() == int(x.argmax()) and not d_index.is_floating_point()


def test_vmap_runs_the_batched_kernel_once(monkeypatch):
    made = []
    monkeypatch.setattr(adc.torch, "batched", lambda k, params: made.append(params) or adc.runtime.functional.batched(k, params))
    op = adc.torch.op(F64["logsumexp_rows"])
    xs = torch.randn(4, 3, 5, dtype=torch.float64)
    torch.testing.assert_close(torch.func.vmap(op, in_dims=1)(xs), torch.stack([op(xs[:, j].contiguous()) for j in range(3)]))
    assert made == [(0,)]


def test_vmap_of_grad_gives_per_example_gradients():
    op = adc.torch.op(F64["sigmoid_shift"])
    x = torch.randn(6, dtype=torch.float64)
    deltas = torch.randn(5, dtype=torch.float64)
    per_example = torch.func.vmap(torch.func.grad(lambda d: op(x, d).sum()))(deltas)
    s = torch.sigmoid(x[None] + deltas[:, None])
    torch.testing.assert_close(per_example, (s * (1 - s)).sum(1))


def test_an_op_deep_copies_as_itself_and_pickles_by_its_kernel():
    """So a module holding one copies and saves (copy.deepcopy, torch.save of the whole module)."""
    op = adc.torch.op(F32["cross_entropy"])
    model = Classifier(op)
    assert copy.deepcopy(model).loss is op
    again = pickle.loads(pickle.dumps(op))
    args = tensors(F32["cross_entropy"])
    torch.testing.assert_close(again(*args), op(*args))


def test_an_integer_result_is_not_differentiable():
    m = adc.compile("def f(x: f64[N]) -> (f64[N], i64):\n    return x * 2.0, argmax(x, axis=0)\n")
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    y, i = adc.torch.op(m.f)(x)
    assert not i.requires_grad and i.item() == int(x.argmax())
    y.sum().backward()
    torch.testing.assert_close(x.grad, torch.full((4,), 2.0, dtype=torch.float64))


@pytest.mark.parametrize("value, error, message", [
    (torch.zeros(3, 4), TypeError, "parameter 'x' expects dtype torch.float64"),
    (torch.zeros(4, 3, dtype=torch.float64).t(), ValueError, "parameter 'x' expects a contiguous tensor"),
    (torch.zeros(3, 4, dtype=torch.float64, device="meta"), ValueError, "parameter 'x' expects a CPU tensor"),
    (torch.zeros(3, dtype=torch.float64), ValueError, "parameter 'x' expects rank 2"),
    ([1.0], TypeError, "parameter 'x' expects a torch.Tensor"),
])
def test_a_wrong_argument_is_named(value, error, message):
    with pytest.raises(error, match=message):
        adc.torch.op(F64["logsumexp_rows"])(value)


def test_ops_of_a_module_and_what_is_not_a_kernel():
    m = adc.compile("def twice(x: f32[N]) -> f32[N]:\n    return 2.0 * x\n")
    torch.testing.assert_close(adc.torch.ops(m).twice(torch.ones(3)), torch.full((3,), 2.0))
    assert adc.torch.ops(m).twice is adc.torch.op(m.twice)
    with pytest.raises(TypeError, match="expects a compiled adc kernel"):
        adc.torch.op(lambda x: x)
