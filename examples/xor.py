"""The seed quick start, exactly as plast's first README promised it: XOR with a jitted training step.

python examples/xor.py
"""

import plast as p

p.init_arenas(device=p.Device.CPU)
model = p.nn.Sequential(p.nn.Linear(2, 8), p.nn.ReLU(), p.nn.Linear(8, 1))
loss_fn = p.nn.MSELoss()
optimizer = p.optim.Adam(model.parameters(), lr=0.01)
x_data = p.tensor([[0, 0], [0, 1], [1, 0], [1, 1]])
y_data = p.tensor([[0], [1], [1], [0]])


@p.jit
def train_step(x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


for epoch in range(1001):
    loss = train_step(x_data, y_data)
    p.reset_transient_arenas()
    if epoch % 200 == 0:
        print(f"Epoch {epoch:4d} | Loss: {loss.item():.6f}")
