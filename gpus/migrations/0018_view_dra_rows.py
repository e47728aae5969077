from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("gpus", "0017_owner_notice_message_said"),
    ]

    operations = [
        migrations.AlterField(
            model_name="viewtyperow",
            name="sharing_strategy",
            field=models.CharField(default="none", max_length=32),
        ),
        migrations.AddField(
            model_name="viewnode",
            name="stack",
            field=models.CharField(blank=True, default="", max_length=16),
        ),
        migrations.AddField(
            model_name="viewtyperow",
            name="dra_logical",
            field=models.IntegerField(default=0),
        ),
        migrations.AddField(
            model_name="viewtyperow",
            name="dra_physical",
            field=models.IntegerField(default=0),
        ),
        migrations.AddField(
            model_name="viewtyperow",
            name="unlimited",
            field=models.BooleanField(default=False),
        ),
    ]
